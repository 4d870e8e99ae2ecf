// stat and fstat as raw system calls. glibc 2.33 turned stat/fstat into exported
// functions (stat@GLIBC_2.33): calling them would make the audit library unloadable
// under every older loader (glibc 2.28-2.32 ignore it as an audit interface).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ldscope::audit {

// On 64-bit Linux the kernel's struct stat is glibc's (x86-64: 144 bytes, aarch64 and
// the other asm-generic ports: 128), which is what glibc itself hands to these calls.
static_assert(sizeof(struct stat) == 144 || sizeof(struct stat) == 128,
              "struct stat is not the kernel's layout on this target");

inline int RawStat(const char* path, struct stat* st) {
  return static_cast<int>(syscall(SYS_newfstatat, AT_FDCWD, path, st, 0));
}

inline int RawFstat(int fd, struct stat* st) {
  return static_cast<int>(syscall(SYS_fstat, fd, st));
}

}  // namespace ldscope::audit
