// The `ldscope diff` text: changes per process, then findings new and resolved.
#include <fmt/format.h>

#include "render/render.h"
#include "text/escape.h"

namespace ldscope::render {
namespace {

std::string ChangeLine(const v1::Change& c) {
  switch (c.kind()) {
    case v1::Change::PROCESS_ADDED: return "+ process only in the new trace";
    case v1::Change::PROCESS_REMOVED: return "- process only in the base trace";
    case v1::Change::LIBRARY_ADDED: return fmt::format("+ {}: {}", c.library(), c.new_());
    case v1::Change::LIBRARY_REMOVED: return fmt::format("- {}: {}", c.library(), c.base());
    case v1::Change::MOVED:
      return fmt::format("~ {} moved: {} -> {}", c.library(), c.base(), c.new_());
    case v1::Change::FOUND_BY_CHANGED:
      return fmt::format("~ {} found by: {} -> {}", c.library(), c.base().empty() ? "(no search)" : c.base(),
                         c.new_().empty() ? "(no search)" : c.new_());
    case v1::Change::VERSION_CHANGED:
      return fmt::format("~ {} version: {} -> {}", c.library(), c.base().empty() ? "?" : c.base(),
                         c.new_().empty() ? "?" : c.new_());
    case v1::Change::FIRST_LOADER_CHANGED:
      return fmt::format("~ first {} library: was {}; now {}", c.library(), c.base(), c.new_());
    default: return "? unknown change";
  }
}

}  // namespace

std::string DiffText(const v1::Diff& d) {
  std::string out;
  size_t changes = 0;
  for (const auto& p : d.processes()) {
    out += fmt::format("process {} (pid {} -> {})\n", p.command(),
                       p.base_pid() ? std::to_string(p.base_pid()) : "-",
                       p.new_pid() ? std::to_string(p.new_pid()) : "-");
    for (const auto& c : p.changes()) out += "  " + ChangeLine(c) + "\n";
    changes += static_cast<size_t>(p.changes_size());
    out += "\n";
  }
  for (const auto& f : d.new_findings()) out += "new " + FindingText(f) + "\n";
  for (const auto& f : d.resolved_findings()) out += "resolved " + FindingText(f) + "\n";
  out += fmt::format("{} change{}, {} new finding{}, {} resolved\n", changes, changes == 1 ? "" : "s",
                     d.new_findings_size(), d.new_findings_size() == 1 ? "" : "s",
                     d.resolved_findings_size());
  return text::GuardLines(std::move(out));
}

}  // namespace ldscope::render
