/* loss_static: a statically linked program (the audit library cannot be loaded into
 * it), which sleeps for argv[1] milliseconds: a process that goes untraced. */
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  const long ms = argc > 1 ? atol(argv[1]) : 0;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return 0;
}
