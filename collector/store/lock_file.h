// Lock files (`ldscope lock`, `ldscope check --lock`): the text layout of a v1::Lock,
// written and read back here. TOML, one library per line so that `git diff` shows each
// change on its own line:
//
//   format = 1
//
//   [program.'system:python3.11']
//   'libc.so.6' = { root = 'system', file = 'libc.so.6', version = 'unknown', build-id = '…' }
//   'libnccl.so.2' = [{ root = …, … }, { root = …, … }]   (several copies)
//
// Every string holds ldscope's escaped text (text/escape.h). The writer writes TOML
// literal strings ('…'), a `'` in a name as `\x27` (which text::Unescape also reads);
// the reader is a TOML parser (toml++), so a hand-edited lock may use any TOML
// spelling: "…" strings ("o'ld\\xff" is 'o\x27ld\xff'), comments, tables laid out
// another way. What is not the layout above (an unknown key, a wrong type, a string
// with a control character) is an error naming its line.
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

// Parses a lock's TOML text: any TOML document of FormatLock's layout; anything else is
// an error, "NAME:LINE: what is wrong" ("NAME:LINE:COLUMN: …" where the text is not
// TOML at all: toml++'s own words).
// Nesting is bounded by the parser (256 levels); the size by ReadLockFile.
Result<v1::Lock> ParseLock(std::string_view text, const std::string& name);

// Reads and parses a lock file (a regular file of at most 16 MiB; not blocking on a
// FIFO). The error names the file, and the line for a garbled one.
Result<v1::Lock> ReadLockFile(const std::string& path);

// Sorts programs, libraries and copies, and drops repeated copies.
void CanonicalLock(v1::Lock* lock);

}  // namespace ldscope::store
