/* The storm workload: dlopen the root of a generated library tree (every library
 * NEEDs a few others and has an RPATH), so the loader maps thousands of objects. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW);
  if (h == NULL) {
    fprintf(stderr, "storm: %s\n", dlerror());
    return 1;
  }
  return 0;
}
