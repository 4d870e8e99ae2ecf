// The one way ldscope opens a file it writes (traces, reports, JUnit, locks, exports,
// the step summary, the collector's output), so that nothing is destroyed, exposed or
// silently lost. The rules, the same for every output:
//   - "-" is standard output.
//   - A symbolic link is followed only when its directory is not shared (sticky or
//     writable by others) or when the directory and the link are both ours; another
//     user's link in /tmp is refused.
//   - A regular file is written as a new 0600 file next to it (".NAME.ldscope-XXXXXX")
//     and renamed over NAME when the writer commits: until then NAME keeps what it had,
//     and a writer that fails before committing leaves it untouched. A trace being
//     recorded is renamed once recording starts (PublishOutput).
//   - Something that is not a regular file (a FIFO, a terminal, /dev/null) is written in
//     place; opening does not block (a FIFO without a reader is an error).
//   - Appending (only the step summary, whose owner appends to it) writes in place.
//   - An output is never one of the command's inputs nor another of its outputs
//     (CheckOutputs).
// Callers exit with kWriteFailed (4) when any of this fails.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "text/result.h"

namespace ldscope::store {

enum class OutputMode { kReplace, kAppend };

struct Output {
  int fd = -1;
  std::string path;      // as given; "-" is standard output
  bool regular = false;  // fd is a regular file (a cut-back after a failed write is possible)
  int dirfd = -1;        // where temp is renamed to name (kReplace of a regular file)
  std::string name;      // the final name in dirfd
  std::string temp;      // the temporary name in dirfd; "" when writing in place
};

// Opens path for writing by the rules above. The error names the file.
Status OpenOutput(const std::string& path, Output* out, OutputMode mode = OutputMode::kReplace);
// Closes and renames the temporary file over the name. The error names the file.
Status CommitOutput(Output* out);
// Renames the temporary file over the name now; writing goes on in it. For a trace being
// recorded, once recording starts: what arrived survives a killed ldscope.
Status PublishOutput(Output* out);
// Closes and removes the temporary file: the name keeps what it had.
void DiscardOutput(Output* out);

// Writes everything, retrying after EINTR and short writes. Returns 0 or the errno.
int WriteAll(int fd, const char* data, size_t size);

// True when a and b are the same file: the same inode if both exist, else the same
// absolute path. "-" is standard output.
bool SameFile(const std::string& a, const std::string& b);

// Refuses an output that is one of the inputs, or two outputs that are one file ("-"
// twice included). Empty names are absent options. `outputs` pairs an option's name
// ("-o", "--junit") with its path; the error names both.
Status CheckOutputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                    const std::vector<std::string>& inputs);

// Writes text to path through OpenOutput and commits it. The error names the file and
// the errno text.
Status WriteTextFile(const std::string& path, const std::string& text, OutputMode mode = OutputMode::kReplace);

}  // namespace ldscope::store
