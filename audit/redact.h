// Which command-line arguments hold secrets, shared by the audit library (which leaves
// their values out of every trace) and the collector (its own titles). Freestanding:
// no libc, no heap.
//
// The rule (README, "Security"): an argument NAME=VALUE, -NAME=VALUE or --NAME=VALUE
// whose NAME (letters, digits, '-', '_', '.') contains, in any case, one of the words
// below has its VALUE replaced by "<redacted>"; an argument -NAME or --NAME with such a
// NAME and no '=' has the whole next argument replaced.
#pragma once

#include <cstddef>

namespace ldscope::redact {

inline constexpr char kRedacted[] = "<redacted>";
inline constexpr size_t kRedactedLen = sizeof kRedacted - 1;

// What to write for one argument.
struct Verdict {
  size_t keep = 0;     // the argument's first `keep` bytes are written as they are
  bool value = false;  // then kRedacted (its value was left out)
  bool next = false;   // and the next argument is kRedacted entirely
};

namespace detail {

inline constexpr const char* kWords[] = {"password", "passwd",  "token",  "secret",
                                         "api-key",  "api_key", "apikey", "credential"};

constexpr char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

constexpr bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

// Whether name[0, len) contains word, ignoring case.
constexpr bool Contains(const char* name, size_t len, const char* word) {
  size_t w = 0;
  while (word[w] != '\0') ++w;
  for (size_t i = 0; i + w <= len; ++i) {
    size_t j = 0;
    while (j < w && Lower(name[i + j]) == word[j]) ++j;
    if (j == w) return true;
  }
  return false;
}

}  // namespace detail

// Whether name[0, len) is a NAME of the rule above that says secret.
constexpr bool SecretName(const char* name, size_t len) {
  if (len == 0) return false;
  for (size_t i = 0; i < len; ++i)
    if (!detail::NameChar(name[i])) return false;
  for (const char* word : detail::kWords)
    if (detail::Contains(name, len, word)) return true;
  return false;
}

// The verdict on arg[0, len).
constexpr Verdict Judge(const char* arg, size_t len) {
  size_t dashes = 0;
  while (dashes < len && dashes < 2 && arg[dashes] == '-') ++dashes;
  size_t eq = dashes;
  while (eq < len && arg[eq] != '=') ++eq;
  if (eq < len) {
    if (SecretName(arg + dashes, eq - dashes)) return {eq + 1, true, false};
    return {len, false, false};
  }
  if (dashes > 0 && SecretName(arg + dashes, len - dashes)) return {len, false, true};
  return {len, false, false};
}

}  // namespace ldscope::redact
