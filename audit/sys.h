// The audit library's only way to the kernel: raw system calls (x86_64 and aarch64), so
// that it needs no libc. Loading a libc.so.6 of its own into the audit namespace (mapping,
// relocating and initialising a second copy of libc in every traced process) was most of
// what tracing cost a short process (bench/RESULTS.md, "The audit library without
// libc").
//
// Each call returns what the kernel returns: a result >= 0, or -errno. Nothing here
// touches errno, the program's or any other: a hook leaves it as it found it. Header-only
// (objinfo_test compiles objinfo.cc into an ordinary program too).
#pragma once

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "audit/sys.h: raw system calls are written for x86_64 and aarch64 only"
#endif

namespace ldscope::audit::sys {

#if defined(__x86_64__)
inline long Call(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#else
inline long Call(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}
#endif

template <typename T>
inline long L(T v) {
  return (long)(v);  // pointers, ints and sizes alike, as the kernel takes them
}

// The thread pointer: unique per live thread, non-zero, no system call (what glibc's
// pthread_self is derived from).
inline uintptr_t ThreadPointer() {
  uintptr_t tp;
#if defined(__x86_64__)
  __asm__("mov %%fs:0, %0" : "=r"(tp));
#else
  __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#endif
  return tp;
}

inline long Read(int fd, void* buf, size_t n) { return Call(SYS_read, fd, L(buf), L(n)); }
inline long Write(int fd, const void* buf, size_t n) { return Call(SYS_write, fd, L(buf), L(n)); }
inline long Open(const char* path, int flags, int mode = 0) {
  return Call(SYS_openat, AT_FDCWD, L(path), flags, mode);
}
inline long Close(int fd) { return Call(SYS_close, fd); }
inline long Readlink(const char* path, char* buf, size_t n) {
  return Call(SYS_readlinkat, AT_FDCWD, L(path), L(buf), L(n));
}
inline long Stat(const char* path, struct stat* st) {
  return Call(SYS_newfstatat, AT_FDCWD, L(path), L(st), 0);
}
inline long Fstat(int fd, struct stat* st) { return Call(SYS_fstat, fd, L(st)); }
inline long Fcntl(int fd, int cmd, long arg) { return Call(SYS_fcntl, fd, cmd, arg); }
inline long Ioctl(int fd, unsigned long req, void* arg) { return Call(SYS_ioctl, fd, L(req), L(arg)); }
// Returns the length with the NUL, as the system call does.
inline long Getcwd(char* buf, size_t n) { return Call(SYS_getcwd, L(buf), L(n)); }
inline long Getpid() { return Call(SYS_getpid); }
inline long Getuid() { return Call(SYS_getuid); }
inline long Geteuid() { return Call(SYS_geteuid); }
// getrlimit(2) of this process (prlimit64 with no new limit; the kernel's struct is two
// 64-bit numbers on both architectures).
struct Rlimit64 {
  uint64_t cur, max;
};
inline long Getrlimit(int resource, Rlimit64* r) { return Call(SYS_prlimit64, 0, resource, 0, L(r)); }
inline long Getppid() { return Call(SYS_getppid); }
inline long Gettid() { return Call(SYS_gettid); }
inline long SchedYield() { return Call(SYS_sched_yield); }
inline long Socket(int domain, int type, int proto) { return Call(SYS_socket, domain, type, proto); }
inline long Connect(int fd, const void* addr, unsigned len) { return Call(SYS_connect, fd, L(addr), len); }
inline long Getsockopt(int fd, int level, int name, void* v, unsigned* len) {
  return Call(SYS_getsockopt, fd, level, name, L(v), L(len));
}
inline long Setsockopt(int fd, int level, int name, const void* v, unsigned len) {
  return Call(SYS_setsockopt, fd, level, name, L(v), len);
}
inline long Send(int fd, const void* buf, size_t n, int flags) {
  return Call(SYS_sendto, fd, L(buf), L(n), flags, 0, 0);
}
inline long Sendmsg(int fd, const void* msg, int flags) { return Call(SYS_sendmsg, fd, L(msg), flags); }
inline long MemfdCreate(const char* name, unsigned flags) { return Call(SYS_memfd_create, L(name), flags); }
inline long Ftruncate(int fd, long len) { return Call(SYS_ftruncate, fd, len); }
// poll(2) with a timeout in milliseconds (ppoll: aarch64 has no poll).
inline long Poll(void* fds, unsigned long nfds, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  return Call(SYS_ppoll, L(fds), L(nfds), L(timeout_ms < 0 ? nullptr : &ts), 0, 8);
}
inline void* Mmap(void* addr, size_t len, int prot, int flags, int fd, long off) {
  return reinterpret_cast<void*>(Call(SYS_mmap, L(addr), L(len), prot, flags, fd, off));
}
inline bool MmapFailed(void* p) {
  return reinterpret_cast<uintptr_t>(p) > static_cast<uintptr_t>(-4096);
}
inline long Munmap(void* addr, size_t len) { return Call(SYS_munmap, L(addr), L(len)); }
inline long Madvise(void* addr, size_t len, int advice) { return Call(SYS_madvise, L(addr), L(len), advice); }
inline long Mincore(void* addr, size_t len, unsigned char* vec) {
  return Call(SYS_mincore, L(addr), L(len), L(vec));
}
inline long Uname(void* buf) { return Call(SYS_uname, L(buf)); }
inline long ClockGettimeSyscall(clockid_t clk, timespec* ts) { return Call(SYS_clock_gettime, clk, L(ts)); }

}  // namespace ldscope::audit::sys
