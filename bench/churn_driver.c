/* The churn workload (bench/big_trace): dlopen and dlclose the libraries named on the
 * command line, over and over, for the given number of seconds (or, as "rounds=N", N
 * times: a trace of a given size). Under `ldscope run` it
 * makes a trace of millions of events (searches, opens, closes, activity). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: churn_driver SECONDS|rounds=N LIB...\n");
    return 2;
  }
  const int by_rounds = strncmp(argv[1], "rounds=", 7) == 0;
  const unsigned long limit = by_rounds ? strtoul(argv[1] + 7, NULL, 10) : 0;
  const double end = by_rounds ? 0 : now() + atof(argv[1]);
  unsigned long rounds = 0;
  while (by_rounds ? rounds < limit : now() < end) {
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
