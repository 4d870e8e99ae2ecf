// Lock files (`ldscope lock`, `ldscope check --lock`): the text layout of a v1::Lock,
// written and read back here. A strict subset of TOML (Python's tomllib reads it), one
// library per line so that `git diff` shows each change on its own line:
//
//   format = 1
//
//   [program.'system:python3.11']
//   'libc.so.6' = { root = 'system', file = 'libc.so.6', version = 'unknown', build-id = '…' }
//   'libnccl.so.2' = [{ root = …, … }, { root = …, … }]   (several copies)
//
// Every string is a TOML literal string ('…') holding ldscope's escaped text
// (text/escape.h); a `'` in a name is written `\x27`, which text::Unescape also reads.
#pragma once

#include <string>
#include <string_view>

#include "ldscope_proto/lock.pb.h"
#include "text/result.h"

namespace ldscope::store {

inline constexpr uint32_t kLockFormat = 1;

// The roots a lock entry can be relative to ("/": none, the file is absolute).
bool IsLockRoot(const std::string& root);
// "ROOT:FILE", or FILE itself for the root "/".
std::string Rooted(const std::string& root, const std::string& file);

// The lock's text: programs and libraries sorted, copies sorted and distinct.
std::string FormatLock(const v1::Lock& lock);

// Parses what FormatLock writes (blank lines, comments, spaces around `=` and `,` and
// the braces are free; anything else is an error, "NAME:LINE: what is wrong").
Result<v1::Lock> ParseLock(std::string_view text, const std::string& name);

// Reads and parses a lock file (a regular file; not blocking on a FIFO). The error names
// the file, and the line for a garbled one.
Result<v1::Lock> ReadLockFile(const std::string& path);

// Sorts programs, libraries and copies, and drops repeated copies.
void CanonicalLock(v1::Lock* lock);

}  // namespace ldscope::store
