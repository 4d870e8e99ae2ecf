/* snapwait: a process for `ldscope snapshot` tests, whose lifetime the test controls.
 * Each argument is a step, run in order:
 *   open PATH (RTLD_NOW) | lazy PATH (RTLD_LAZY) | gopen PATH (RTLD_NOW|RTLD_GLOBAL) |
 *   mopen PATH (dlmopen into a new namespace) | churn PATH (from now on, a thread
 *   dlopens and dlcloses PATH in a loop) | many DIR N (dlopens DIR/libN0.so ... one by
 *   one: libmany0.so to libmany<N-1>.so)
 * Then it prints "ready" on stdout and waits until its standard input reaches its end
 * (the test closes the pipe), then exits 0. A step that fails prints "failed: ..." on
 * stdout and exits 1. Built statically too (snapwait_static), where only the wait runs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef SNAPWAIT_STATIC
static volatile int stop_churn;
static void* churn(void* path) {
  while (!stop_churn) {
    void* h = dlopen(path, RTLD_NOW);
    if (h != NULL) dlclose(h);
  }
  return NULL;
}

static void check(void* h, const char* path) {
  if (h == NULL) {
    printf("failed: %s: %s\n", path, dlerror());
    exit(1);
  }
}
#endif

int main(int argc, char** argv) {
#ifdef SNAPWAIT_STATIC
  (void)argc;
  (void)argv;
#else
  pthread_t churner;
  int churning = 0;
  for (int i = 1; i < argc; ++i) {
    const char* step = argv[i];
    const char* path = i + 1 < argc ? argv[++i] : "";
    if (strcmp(step, "open") == 0) {
      check(dlopen(path, RTLD_NOW), path);
    } else if (strcmp(step, "lazy") == 0) {
      check(dlopen(path, RTLD_LAZY), path);
    } else if (strcmp(step, "gopen") == 0) {
      check(dlopen(path, RTLD_NOW | RTLD_GLOBAL), path);
    } else if (strcmp(step, "mopen") == 0) {
      check(dlmopen(LM_ID_NEWLM, path, RTLD_NOW), path);
    } else if (strcmp(step, "envopen") == 0) {
      const char* value = getenv(path);
      if (value != NULL && *value != '\0') check(dlopen(value, RTLD_NOW), value);
    } else if (strcmp(step, "nodump") == 0) {
      if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        printf("failed: prctl\n");
        return 1;
      }
    } else if (strcmp(step, "churn") == 0) {
      churning = pthread_create(&churner, NULL, churn, (void*)path) == 0;
    } else if (strcmp(step, "many") == 0 && i + 1 < argc) {
      const int n = atoi(argv[++i]);
      char name[4096];
      for (int k = 0; k < n; ++k) {
        snprintf(name, sizeof name, "%s/libmany%d.so", path, k);
        check(dlopen(name, RTLD_NOW), name);
      }
    } else {
      printf("failed: unknown step %s\n", step);
      return 1;
    }
  }
#endif
  printf("ready\n");
  fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {
  }
#ifndef SNAPWAIT_STATIC
  if (churning) {
    stop_churn = 1;
    pthread_join(churner, NULL);
  }
#endif
  return 0;
}
