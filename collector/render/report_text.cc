// The report for people: one paragraph per finding, most severe first per process.
#include <fmt/format.h>

#include "render/render.h"

namespace ldscope::render {
namespace {

const char* SeverityWord(v1::Severity s) {
  switch (s) {
    case v1::ERROR: return "error";
    case v1::WARNING: return "warning";
    case v1::INFO: return "info";
    default: return "note";
  }
}

// Wraps text at width columns, indenting continuation lines.
std::string Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    pos = end + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

}  // namespace

std::string FindingKindName(v1::FindingKind k) {
  switch (k) {
    case v1::DUPLICATE_LIBRARY: return "duplicate-library";
    case v1::DUPLICATE_INFO: return "duplicate-info";
    case v1::SHADOWED_DEPENDENCY: return "shadowed-dependency";
    case v1::SEARCH_ORDER_SHADOWING: return "search-order-shadowing";
    case v1::MISSING_SYMBOL: return "missing-symbol";
    case v1::MISSING_LIBRARY: return "missing-library";
    case v1::FALL_THROUGH: return "fall-through";
    case v1::RUNTIME_FAMILY: return "runtime-family";
    case v1::SYMBOL_INTERPOSITION: return "symbol-interposition";
    default: return "unknown";
  }
}

std::string FindingText(const v1::Finding& f) {
  // The compiler-style layout: headline, labelled evidence, fixes.
  if (!f.headline().empty()) {
    std::string out = fmt::format("{}[{}]: {}\n", SeverityWord(f.severity()), FindingKindName(f.kind()),
                                  f.headline());
    for (const auto& d : f.details()) out += fmt::format("  {}: {}\n", d.label(), d.text());
    for (const auto& x : f.fixes()) out += fmt::format("  fix: {}\n", x.text());
    return out;
  }
  return fmt::format("{} [{}] process {} ({})\n", SeverityWord(f.severity()),
                     FindingKindName(f.kind()), f.pid(), f.exe()) +
         Wrap(f.message(), 100, "  ");
}

std::string ReportText(const v1::Report& r) {
  std::string out;
  for (const auto& f : r.findings()) out += FindingText(f) + "\n";
  for (const auto& n : r.notes()) out += Wrap("note: " + n, 100, "");
  size_t errors = 0, warnings = 0, infos = 0;
  for (const auto& f : r.findings()) {
    errors += f.severity() == v1::ERROR;
    warnings += f.severity() == v1::WARNING;
    infos += f.severity() == v1::INFO;
  }
  out += fmt::format("{} error{}, {} warning{}, {} info\n", errors, errors == 1 ? "" : "s", warnings,
                     warnings == 1 ? "" : "s", infos);
  return out;
}

}  // namespace ldscope::render
