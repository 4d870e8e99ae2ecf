// `ldscope check --lock`'s text: the differences between a lock and a trace, a block per
// program, then a count line.
#include <fmt/format.h>

#include "render/render.h"
#include "text/escape.h"

namespace ldscope::render {

std::string LockDifferenceLine(const v1::LockDifference& d) {
  switch (d.kind()) {
    case v1::LockDifference::PROGRAM_ADDED: return "+ program not in the lock";
    case v1::LockDifference::PROGRAM_MISSING: return "- program in the lock, not run";
    case v1::LockDifference::LIBRARY_ADDED: return fmt::format("+ {}: {}", d.library(), d.traced());
    case v1::LockDifference::LIBRARY_REMOVED: return fmt::format("- {}: {}", d.library(), d.locked());
    case v1::LockDifference::FILE_CHANGED:
      return fmt::format("~ {} file: {} -> {}", d.library(), d.locked(), d.traced());
    case v1::LockDifference::VERSION_CHANGED:
      return fmt::format("~ {} version: {} -> {}", d.library(), d.locked(), d.traced());
    case v1::LockDifference::BUILD_ID_CHANGED:
      return fmt::format("~ {} build-id: {} -> {}", d.library(), d.locked(), d.traced());
    case v1::LockDifference::COPIES_CHANGED:
      return fmt::format("~ {} copies: {} -> {}", d.library(), d.locked(), d.traced());
    default: return "? unknown difference";
  }
}

std::string LockCheckText(const v1::LockCheck& c, const std::string& lock_name) {
  std::string out;
  std::string program;
  bool first = true;
  for (const auto& d : c.differences()) {
    if (first || d.program() != program) {
      out += fmt::format("{}program {}\n", first ? "" : "\n", d.program());
      program = d.program();
      first = false;
    }
    out += "  " + LockDifferenceLine(d) + "\n";
  }
  const int n = c.differences_size();
  out += fmt::format("{}{} difference{} from the lock {}\n", n ? "\n" : "", n, n == 1 ? "" : "s",
                     lock_name);
  return text::GuardLines(std::move(out));
}

}  // namespace ldscope::render
