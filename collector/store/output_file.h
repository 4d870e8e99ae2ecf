// Opening and writing the files ldscope produces (traces, reports, exports) so that
// nothing is destroyed, exposed or silently lost: no truncation before the run can
// start, 0600 files, no symlinks followed in shared directories, every write checked.
#pragma once

#include <cstddef>
#include <string>

#include "text/result.h"

namespace ldscope::store {

struct Output {
  int fd = -1;
  std::string path;      // as given; "-" is standard output
  bool created = false;  // OpenOutput created the file (so it may remove it again)
  bool regular = false;  // a regular file (truncated when writing starts)
};

// Opens path for writing without truncating it. "-" is standard output (a duplicate of
// descriptor 1). A new file is created 0600. A symbolic link is not followed when its
// directory is shared (sticky or writable by others) unless the directory and the link
// both belong to us. The open does not block (a FIFO without a reader is an error).
// The error names the file.
Status OpenOutput(const std::string& path, Output* out);
// Empties a regular file that existed before: call when writing really starts.
// Returns 0 or the errno.
int TruncateOutput(const Output& out);
// Closes, and removes the file when OpenOutput created it (nothing was written).
void DiscardOutput(Output* out);
// Closes; a failed close can report a lost write.
Status CloseOutput(Output* out);

// Writes everything, retrying after EINTR and short writes. Returns 0 or the errno.
int WriteAll(int fd, const char* data, size_t size);

// True when a and b are the same file: the same inode if both exist, else the same
// absolute path.
bool SameFile(const std::string& a, const std::string& b);

// Writes text to path ("-": standard output) through OpenOutput, truncating it first.
// The error names the file and the errno text.
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace ldscope::store
