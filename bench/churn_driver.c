/* The churn workload (bench/big_trace): dlopen and dlclose the libraries named on the
 * command line, over and over, for the given number of seconds. Under `ldscope run` it
 * makes a trace of millions of events (searches, opens, closes, activity). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: churn_driver SECONDS LIB...\n");
    return 2;
  }
  const double end = now() + atof(argv[1]);
  unsigned long rounds = 0;
  while (now() < end) {
    for (int i = 2; i < argc; ++i) {
      void* h = dlopen(argv[i], RTLD_NOW);
      if (h == NULL) {
        fprintf(stderr, "churn: %s\n", dlerror());
        return 1;
      }
      dlclose(h);
    }
    ++rounds;
  }
  fprintf(stderr, "churn: %lu rounds\n", rounds);
  return 0;
}
