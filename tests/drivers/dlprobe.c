/* dlprobe: a scriptable test program that drives the dynamic loader. Each argument
 * is a step, run in order:
 *   open PATH | lazy PATH | gopen PATH (RTLD_GLOBAL) | mopen PATH | noload PATH | close |
 *   must PATH (open; when it fails, exit 1 at once, as a program that needs the library) |
 *   sleep MS |
 *   threads N PATH... (N threads released at once; thread k dlopens PATH number k) |
 *   tcycles N M PATH... (N threads released at once; thread k makes M dlopen+dlclose
 *   cycles of PATH number k; thread 0 forks half-way, between the others' cycles, and the
 *   child makes one more cycle and exits; prints the cycles that succeeded in the parent) |
 *   cycles N PATH (N times dlopen+dlclose of PATH; prints how many succeeded) |
 *   mark PATH (creates the file PATH: a signal to a test) | closefd N (closes descriptor N) |
 *   waitfile PATH (waits until the file PATH exists, 20 s at most) |
 *   bgopen PATH (dlopens PATH in a background thread) | join (waits for that thread,
 *   in the process that started it) |
 *   fork (the child runs the remaining steps; the parent waits, then runs them too) |
 *   forkchild (only the child runs the remaining steps; the parent waits and exits with
 *   the child's status) | cd DIR (chdir, so that relative names resolve elsewhere) |
 *   exec PROG ARGS... | exit N | _exit N
 * It prints one line per step on stdout, so tests can compare outputs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void* handles[256];
static int nhandles;

static pthread_t bg_thread;
static pid_t bg_owner;  /* the process whose thread it is (a forked child has none) */
static void* bg_open(void* path) { return dlopen(path, RTLD_NOW); }

struct job {
  char** paths;
  int npaths;
  pthread_barrier_t* barrier;
  int failures;
};

static void* thread_main(void* arg) {
  struct job* j = arg;
  pthread_barrier_wait(j->barrier);
  for (int i = 0; i < j->npaths; ++i)
    if (dlopen(j->paths[i], RTLD_NOW) == NULL) j->failures++;
  /* And once more, now that the others are loading too: found loaded, no search. */
  if (j->npaths > 0 && dlopen(j->paths[0], RTLD_NOW | RTLD_NOLOAD) == NULL) j->failures++;
  return NULL;
}

struct cjob {
  const char* path;
  int cycles;
  int fork_half_way;
  pthread_barrier_t* barrier;
  int ok;
};

/* Taken for reading around every cycle of tcycles, and for writing around its fork, so
   the fork falls between the other threads' cycles (they still overlap each other). A
   child forked in the middle of another thread's cycle inherits what glibc's fork does
   not make consistent: dlclose runs the library's __cxa_finalize, which holds glibc's
   __exit_funcs_lock (the child then hangs in exit()), and a half-done dlopen leaves an
   object the child's next dlclose unloads. */
static pthread_rwlock_t cycle_lock;

static void* cycle_main(void* arg) {
  struct cjob* j = arg;
  pthread_barrier_wait(j->barrier);
  for (int k = 0; k < j->cycles; ++k) {
    if (j->fork_half_way && k == j->cycles / 2) {
      pthread_rwlock_wrlock(&cycle_lock);
      const pid_t p = fork();
      if (p == 0) {
        void* h = dlopen(j->path, RTLD_NOW);
        if (h != NULL) dlclose(h);
        exit(h != NULL ? 0 : 1);
      }
      pthread_rwlock_unlock(&cycle_lock);
      int st = 0;
      if (p > 0) waitpid(p, &st, 0);
    }
    pthread_rwlock_rdlock(&cycle_lock);
    void* h = dlopen(j->path, RTLD_NOW);
    if (h != NULL) {
      ++j->ok;
      dlclose(h);
    }
    pthread_rwlock_unlock(&cycle_lock);
  }
  return NULL;
}

static void opened(const char* what, const char* path, void* h) {
  if (h != NULL) {
    if (nhandles < 256) handles[nhandles++] = h;
    printf("%s %s: ok\n", what, path);
  } else {
    printf("%s %s: failed: %s\n", what, path, dlerror());
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* s = argv[i];
    const char* a = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(s, "open")) {
      opened("open", a, dlopen(a, RTLD_NOW)), ++i;
    } else if (!strcmp(s, "must")) {
      void* h = dlopen(a, RTLD_NOW);
      opened("must", a, h), ++i;
      if (h == NULL) return 1;
    } else if (!strcmp(s, "gopen")) {
      opened("gopen", a, dlopen(a, RTLD_NOW | RTLD_GLOBAL)), ++i;
    } else if (!strcmp(s, "lazy")) {
      opened("lazy", a, dlopen(a, RTLD_LAZY)), ++i;
    } else if (!strcmp(s, "noload")) {
      void* h = dlopen(a, RTLD_NOW | RTLD_NOLOAD);
      printf("noload %s: %s\n", a, h ? "loaded" : "not loaded");
      if (h) dlclose(h);
      ++i;
    } else if (!strcmp(s, "mopen")) {
      opened("mopen", a, dlmopen(LM_ID_NEWLM, a, RTLD_NOW)), ++i;
    } else if (!strcmp(s, "close")) {
      if (nhandles > 0) dlclose(handles[--nhandles]);
      printf("close\n");
    } else if (!strcmp(s, "cycles")) {
      const int n = atoi(a);
      const char* path = i + 2 < argc ? argv[i + 2] : "";
      int ok = 0;
      for (int k = 0; k < n; ++k) {
        void* h = dlopen(path, RTLD_NOW);
        if (h != NULL) {
          ++ok;
          dlclose(h);
        }
      }
      printf("cycles %d: %d ok (pid %d)\n", n, ok, (int)getpid());
      i += 2;
    } else if (!strcmp(s, "closefd")) {
      printf("closefd %s: %d\n", a, close(atoi(a)));
      fflush(stdout);
      i += 1;
    } else if (!strcmp(s, "mark")) {
      FILE* f = fopen(a, "w");
      if (f != NULL) fclose(f);
      ++i;
    } else if (!strcmp(s, "waitfile")) {
      for (int k = 0; k < 2000 && access(a, F_OK) != 0; ++k) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
      }
      ++i;
    } else if (!strcmp(s, "bgopen")) {
      bg_owner = getpid();
      pthread_create(&bg_thread, NULL, bg_open, (void*)a);
      ++i;
    } else if (!strcmp(s, "join")) {
      if (bg_owner == getpid()) {
        void* h = NULL;
        pthread_join(bg_thread, &h);
        printf("bgopen: %s\n", h != NULL ? "ok" : "failed");
      } else {
        printf("bgopen: not ours\n");
      }
    } else if (!strcmp(s, "sleep")) {
      struct timespec ts = {atoi(a) / 1000, (atoi(a) % 1000) * 1000000L};
      nanosleep(&ts, NULL);
      ++i;
    } else if (!strcmp(s, "threads")) {
      int n = atoi(a);
      pthread_t t[64];
      struct job jobs[64];
      pthread_barrier_t barrier;
      if (n > 64) n = 64;
      pthread_barrier_init(&barrier, NULL, (unsigned)n);
      for (int k = 0; k < n; ++k) {
        const int npaths = argc - i - 2;
        jobs[k] = (struct job){argv + i + 2 + (npaths ? k % npaths : 0), npaths ? 1 : 0,
                               &barrier, 0};
        pthread_create(&t[k], NULL, thread_main, &jobs[k]);
      }
      int failures = 0;
      for (int k = 0; k < n; ++k) {
        pthread_join(t[k], NULL);
        failures += jobs[k].failures;
      }
      printf("threads %d: %d failures\n", n, failures);
      i = argc;
    } else if (!strcmp(s, "tcycles")) {
      int n = atoi(a);
      const int m = i + 2 < argc ? atoi(argv[i + 2]) : 0;
      const int npaths = argc - i - 3;
      pthread_t t[64];
      struct cjob jobs[64];
      pthread_barrier_t barrier;
      if (n > 64) n = 64;
      if (n < 1 || npaths < 1) return 2;
      pthread_rwlockattr_t attr;
      pthread_rwlockattr_init(&attr);
      /* A waiting fork goes before new cycles: it happens half-way, among the others. */
      pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
      pthread_rwlock_init(&cycle_lock, &attr);
      pthread_barrier_init(&barrier, NULL, (unsigned)n);
      for (int k = 0; k < n; ++k) {
        jobs[k] = (struct cjob){argv[i + 3 + k % npaths], m, k == 0, &barrier, 0};
        pthread_create(&t[k], NULL, cycle_main, &jobs[k]);
      }
      int ok = 0;
      for (int k = 0; k < n; ++k) {
        pthread_join(t[k], NULL);
        ok += jobs[k].ok;
      }
      printf("tcycles %d: %d ok\n", n, ok);
      i = argc;
    } else if (!strcmp(s, "fork")) {
      fflush(stdout);
      pid_t p = fork();
      if (p > 0) {
        int st;
        waitpid(p, &st, 0);
      }
      printf("%s\n", p == 0 ? "child" : "parent");
    } else if (!strcmp(s, "forkchild")) {
      fflush(stdout);
      pid_t p = fork();
      if (p > 0) {
        int st = 0;
        waitpid(p, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
      }
      printf("child\n");
    } else if (!strcmp(s, "cd")) {
      printf("cd: %s\n", chdir(a) == 0 ? "ok" : "failed");
      ++i;
    } else if (!strcmp(s, "exec")) {
      fflush(stdout);
      execv(a, argv + i + 1);
      printf("exec %s: failed\n", a);
      return 127;
    } else if (!strcmp(s, "exit")) {
      return atoi(a);
    } else if (!strcmp(s, "_exit")) {
      fflush(stdout);
      _exit(atoi(a));
    } else {
      fprintf(stderr, "dlprobe: unknown step %s\n", s);
      return 2;
    }
    fflush(stdout);
  }
  return 0;
}
