// What the audit library knows of the process it runs in, without a libc (see sys.h):
// the environment and the auxiliary vector (from what ld.so passes to the library's
// initialiser), the clocks (the vDSO's clock_gettime, else the system call), and the
// dynamic loader's `_r_debug` and glibc version (read from ld.so's image in memory).
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>

namespace ldscope::audit::proc {

// Set by the library's initialiser (DT_INIT_ARRAY), which ld.so calls with the
// process's argc, argv and environment before la_version (elf/dl-init.c call_init; for
// an auditor from rtld.c's dlmopen_doit: _dl_argc, _dl_argv, __environ). Null before.
char** Environ();
// argv and argc as ld.so passed them (null, 0 before): when ld.so runs as a program, the
// program's arguments only.
char** Argv(int* argc);
// The value of NAME in the environment, or null.
const char* Getenv(const char* name);
// The auxiliary vector's value for type (AT_*), 0 when it has none.
uintptr_t Aux(unsigned long type);

// clock_gettime: through the vDSO when it exports it, else the system call. 0 or -errno.
int ClockGettime(clockid_t clock, timespec* ts);

// The dynamic loader: its image mapped at `base` (AT_BASE; when ld.so was run as a
// program, AT_BASE is 0 and the caller finds where /proc/self/exe is mapped). Looked up
// once, on the first call.
struct Loader {
  // The base namespace's `struct r_debug` (ld.so's _r_debug), or null.
  const void* r_debug = nullptr;
  // The glibc release ("2.36"): from ld.so's version banner ("... release version
  // 2.36.", glibc 2.33 and later), else from its file name ("ld-2.31.so", glibc 2.33 and
  // earlier). Empty when neither says.
  char glibc_version[32] = {};
};
// exe_path: /proc/self/exe, which names ld.so when it was run as a program.
const Loader& FindLoader(uintptr_t base, const char* exe_path);

namespace internal {
// For tests: the version in a banner or file name ("" when none), as FindLoader reads it.
bool VersionFromBanner(const char* text, size_t len, char* out, size_t cap);
bool VersionFromFileName(const char* name, char* out, size_t cap);
}  // namespace internal

}  // namespace ldscope::audit::proc
