// CI output for GitHub Actions: findings as workflow-command annotations, and a
// Markdown summary for $GITHUB_STEP_SUMMARY.
#include <string_view>

#include <fmt/format.h>

#include "render/render.h"

namespace ldscope::render {
namespace {

// Workflow-command data escaping (and, for properties, ':' and ',').
std::string Escape(const std::string& s, bool property) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\r': out += "%0D"; break;
      case '\n': out += "%0A"; break;
      case ':': out += property ? "%3A" : ":"; break;
      case ',': out += property ? "%2C" : ","; break;
      default: out += c;
    }
  }
  return out;
}

// Markdown text that shows s as it is (paths hold `_`, `*`, `\`, `<`...), on one line
// and inside a table cell.
std::string Cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '\n': out += ' '; break;
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default:
        if (std::string_view("\\`*_[]|~#!(){}").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
  }
  return out;
}

// The line of the workflow's own code that made the finding's first object load: the
// ctypes call, else the import statement, else the top-level import, whichever lies
// in the workspace (GitHub places an annotation on a file of the repository only).
const v1::SourceLine* UserLine(const v1::Finding& f, const std::string& workspace) {
  if (workspace.empty()) return nullptr;
  const auto inside = [&](const v1::SourceLine& l) {
    return l.line() > 0 && l.file().size() > workspace.size() + 1 &&
           l.file().compare(0, workspace.size(), workspace) == 0 && l.file()[workspace.size()] == '/';
  };
  for (const auto& o : f.objects()) {
    if (!o.has_python()) continue;
    for (const v1::SourceLine* l : {&o.python().call_site(), &o.python().import_site(), &o.python().top_site()})
      if (inside(*l)) return l;
  }
  return nullptr;
}

}  // namespace

std::string GithubAnnotations(const v1::Report& r, const std::string& workspace) {
  std::string out;
  for (const auto& f : r.findings()) {
    const char* level = f.severity() == v1::ERROR ? "error" : f.severity() == v1::WARNING ? "warning" : "notice";
    // The headline, then the evidence and fixes on the annotation's further lines.
    std::string text = f.headline();
    for (const auto& d : f.details()) text += fmt::format("\n{}: {}", d.label(), d.text());
    for (const auto& x : f.fixes()) text += fmt::format("\nfix: {}", x.text());
    std::string where;
    if (const v1::SourceLine* line = UserLine(f, workspace); line != nullptr)
      where = fmt::format("file={},line={},", Escape(line->file().substr(workspace.size() + 1), true), line->line());
    out += fmt::format("::{} {}title={}::{}\n", level, where,
                       Escape(fmt::format("ldscope {} (pid {})", FindingKindName(f.kind()), f.pid()), true),
                       Escape(text, false));
  }
  return out;
}

std::string GithubLockAnnotations(const v1::LockCheck& c, const std::string& lock_name) {
  std::string out;
  for (const auto& d : c.differences())
    out += fmt::format("::error title={}::{}\n",
                       Escape(fmt::format("ldscope lock {} ({})", lock_name, d.program()), true),
                       Escape(LockDifferenceLine(d), false));
  return out;
}

std::string GithubLockSummary(const v1::LockCheck& c, const std::string& lock_name) {
  std::string out = fmt::format("### ldscope check: lock {}\n\n", Cell(lock_name));
  if (c.differences_size() == 0) return out + "The traces match the lock.\n\n";
  out += "| program | difference |\n| --- | --- |\n";
  for (const auto& d : c.differences())
    out += fmt::format("| {} | {} |\n", Cell(d.program()), Cell(LockDifferenceLine(d)));
  return out + "\n";
}

std::string GithubSummary(const v1::Report& r, const std::string& title) {
  std::string out = fmt::format("### ldscope: {}\n\n", Cell(title));
  if (r.findings_size() == 0) return out + "No loader problems found.\n\n";
  out += "| severity | kind | process | finding |\n| --- | --- | --- | --- |\n";
  for (const auto& f : r.findings()) {
    out += fmt::format("| {} | {} | {} {} | {} |\n", SeverityWord(f.severity()), FindingKindName(f.kind()), f.pid(),
                       Cell(f.exe()), Cell(f.headline()));
  }
  bool fixes = false;
  for (const auto& f : r.findings()) {
    for (const auto& x : f.fixes()) {
      if (!fixes) out += "\n**Fixes**\n\n";
      fixes = true;
      out += fmt::format("- {} (process {}): {}\n", FindingKindName(f.kind()), f.pid(), Cell(x.text()));
    }
  }
  for (const auto& n : r.notes()) out += fmt::format("\n> {}\n", Cell(n));
  return out + "\n";
}

}  // namespace ldscope::render
