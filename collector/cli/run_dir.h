// `run`'s private directory ($TMPDIR/ldscope-XXXXXX, holding its socket), and the
// cleaning of such directories left behind by a `run` that was SIGKILLed.
#pragma once

#include <string>

#include "text/result.h"

namespace ldscope::cli {

// Creates a 0700 directory under tmpdir with an `owner` file naming this process
// (pid, start time, pid namespace). Returns its path.
Result<std::string> MakeRunDir(const std::string& tmpdir);
// Removes what MakeRunDir made (and a socket left inside).
void RemoveRunDir(const std::string& dir);
// Removes directories under tmpdir that are provably a dead `run`'s: named
// ldscope-XXXXXX, a real directory of ours, mode 0700, holding only `owner` and
// `events.sock`, whose owner file names a process of our pid namespace that no longer
// exists (or whose pid now belongs to a process started at another time).
void CleanStaleRunDirs(const std::string& tmpdir);

}  // namespace ldscope::cli
