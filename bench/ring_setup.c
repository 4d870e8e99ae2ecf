// What a ring's set-up costs a freshly forked process, call by call (bench/RESULTS.md,
// "The ring against datagrams"): 200 processes, medians. Also the two /proc/self
// readlinks the audit library makes at its start. Not built by CMake:
//   cc -O2 -o ring_setup bench/ring_setup.c && ./ring_setup [RING_BYTES]
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/memfd.h>
static long ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
#define N 9
enum {EXE,NS,MEMFD,FTR,SEAL,MMAP,TOUCH2,MUNMAP,CLOSE,K};
const char*names[K]={"readlink /proc/self/exe","readlink /proc/self/ns/pid","memfd_create","ftruncate 1MiB+4KiB","F_ADD_SEALS","mmap","touch 2 pages","munmap","close memfd"};
int main(int argc,char**argv){
  size_t sz = argc>1? strtoul(argv[1],0,0) : (1<<20)+4096;
  long s[K][200]; int rounds=200;
  for(int r=0;r<rounds;r++){
    int p[2]; pipe(p);
    pid_t c=fork();
    if(c==0){ long t[K+1]; char b[256]; int i=0;
      t[i++]=ns(); readlink("/proc/self/exe",b,sizeof b); t[i++]=ns(); readlink("/proc/self/ns/pid",b,sizeof b);
      t[i++]=ns(); int m=memfd_create("x",MFD_CLOEXEC|MFD_ALLOW_SEALING); t[i++]=ns(); ftruncate(m,sz);
      t[i++]=ns(); fcntl(m,F_ADD_SEALS,F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL); t[i++]=ns();
      char*q=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_SHARED,m,0); t[i++]=ns(); q[0]=1; q[4096]=1; t[i++]=ns();
      munmap(q,sz); t[i++]=ns(); close(m); t[i++]=ns();
      long d[K]; for(int k=0;k<K;k++) d[k]=t[k+1]-t[k]; write(p[1],d,sizeof d); _exit(0);}
    close(p[1]); long d[K]; read(p[0],d,sizeof d); close(p[0]); waitpid(c,0,0);
    for(int k=0;k<K;k++) s[k][r]=d[k];
  }
  for(int k=0;k<K;k++){ long*a=s[k]; for(int i=0;i<rounds;i++)for(int j=i+1;j<rounds;j++)if(a[j]<a[i]){long x=a[i];a[i]=a[j];a[j]=x;}
    printf("%-28s median %6.2f us  p25 %6.2f  p75 %6.2f\n",names[k],a[rounds/2]/1e3,a[rounds/4]/1e3,a[3*rounds/4]/1e3);}
}
