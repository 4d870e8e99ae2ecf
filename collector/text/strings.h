// Small pieces of text every layer writes: one definition each.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

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

// Each distinct string once (the paths and names millions of objects repeat): numbered in
// the order first seen, and kept at one address for the pool's life.
class StringPool {
 public:
  uint32_t Id(std::string_view s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const std::string& kept = strings_.emplace_back(s);
    const auto id = static_cast<uint32_t>(strings_.size() - 1);
    ids_.emplace(kept, id);
    return id;
  }
  const std::string& operator[](uint32_t id) const { return strings_[id]; }
  const std::string& Intern(std::string_view s) { return strings_[Id(s)]; }

 private:
  std::deque<std::string> strings_;  // stable: ids_ views them
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace ldscope::text
