// Small pieces of text every layer writes: one definition each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace ldscope::text {

// Lower-case hex of every byte ("a1b2"), as build-ids are shown.
std::string Hex(std::string_view bytes);

// The last component of a path ("/usr/lib/libc.so.6" -> "libc.so.6"); the path itself
// when it has no '/'.
std::string BaseName(std::string_view path);

// Where a trace file is damaged: "FILE: at byte offset N: MESSAGE" (MESSAGE alone when
// the problem names no file).
std::string DamageText(std::string_view file, uint64_t offset, std::string_view message);

// A process's command line for a title or a label: its argv (escaped text) joined by
// spaces, or exe when there is no argv.
template <class Argv>
std::string CommandLine(const Argv& argv, std::string_view exe) {
  if (argv.begin() == argv.end()) return std::string(exe);
  return fmt::format("{}", fmt::join(argv, " "));
}

}  // namespace ldscope::text
