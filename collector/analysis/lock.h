// Lock files: what a workload loaded, per program, in terms that do not change between
// two runs on one machine (no pids, times, addresses or CPU-dependent hwcaps
// subdirectories; files relative to recognisable roots), and the differences between a
// lock and a trace. The text layout is store/lock_file.h's.
#pragma once

#include <map>
#include <string>

#include "ldscope_proto/lock.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::analysis {

// A path relative to the first root that holds it: a site-packages or
// dist-packages directory, $CONDA_PREFIX or $VIRTUAL_ENV (env: the process's recorded
// environment), a CUDA toolkit (/usr/local/cuda*/, or the directory holding
// targets/<arch>-linux/lib/), the system directories (/lib, /usr/lib, /lib64,
// /usr/lib64, their multiarch subdirectories, /bin, /usr/bin, /sbin, /usr/sbin); else
// root "/" and the path itself.
v1::LockedFile RootOf(const std::string& path, const std::map<std::string, std::string>& env);

// dir/glibc-hwcaps/NAME/file -> dir/file; also the legacy subdirectories glibc tried
// (subdirs, as loader::Environment::subdirs holds them).
std::string WithoutHwcaps(const std::string& path, const std::vector<std::string>& subdirs);

// Per program (keyed by its executable, relative to a root; argv does not matter), the
// libraries every process of it loaded: SONAME (else file name), root, file, version
// and build-id. Left out: the executable itself, ld.so, the vDSO, ldscope's audit
// library, loads rolled back by a failed dlopen, and what ldscope's Python hook loaded
// for itself.
v1::Lock MakeLock(const v1::Timeline& timeline);

// What differs between the lock and the trace's lock, per program and library. A
// version or build-id "unknown" on either side matches anything; with
// ignore_build_id, build-ids are not compared at all.
v1::LockCheck CheckLock(const v1::Lock& locked, const v1::Lock& traced, bool ignore_build_id);

}  // namespace ldscope::analysis
