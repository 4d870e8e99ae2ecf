// The report for people: per finding a headline, labelled evidence and fixes, most
// severe first per process.
#include <fmt/format.h>

#include "render/render.h"
#include "render/words.h"
#include "text/escape.h"

namespace ldscope::render {

std::string SeverityWord(v1::Severity s) { return EnumWord(s); }

std::string FindingKindName(v1::FindingKind k) { return EnumWord(k); }

namespace {

// The label of a fix's trial: "verified", "not verified", "not tried".
const char* VerifiedWord(v1::VerifyState s) {
  switch (s) {
    case v1::VERIFY_CLEARED:
      return "verified";
    case v1::VERIFY_NOT_CLEARED:
      return "not verified";
    default:
      return "not tried";
  }
}

}  // namespace

// `severity[kind]: headline`, the evidence as labelled lines, then the fixes: one line
// each, unwrapped, as compilers print diagnostics (paths stay whole for copying).
std::string FindingText(const v1::Finding& f) {
  std::string out = fmt::format("{}[{}]: {}\n", SeverityWord(f.severity()),
                                FindingKindName(f.kind()), f.headline());
  out += fmt::format("  process: {} ({}){}\n", f.pid(), f.exe(), f.host().empty() ? "" : " on host " + f.host());
  for (const auto& d : f.details()) out += fmt::format("  {}: {}\n", d.label(), d.text());
  for (const auto& x : f.fixes()) {
    out += fmt::format("  fix: {}\n", x.text());
    // `run --try-fixes`: what running the command with the change showed, under the fix.
    if (x.has_verified()) out += fmt::format("    {}: {}\n", VerifiedWord(x.verified().state()), x.verified().text());
  }
  return text::GuardLines(std::move(out));
}

v1::Summary Summarise(const v1::Report& r) {
  v1::Summary sum;
  for (const auto& f : r.findings()) {
    sum.set_findings(sum.findings() + 1);
    sum.set_errors(sum.errors() + (f.severity() == v1::ERROR));
    sum.set_warnings(sum.warnings() + (f.severity() == v1::WARNING));
    sum.set_infos(sum.infos() + (f.severity() == v1::INFO));
    ++(*sum.mutable_kinds())[FindingKindName(f.kind())];
  }
  return sum;
}

std::string ReportJson(const v1::Report& r) {
  v1::Report stamped = r;
  stamped.set_schema_version(kReportSchemaVersion);
  stamped.set_ldscope_version(LDSCOPE_CORE_VERSION);
  *stamped.mutable_summary() = Summarise(r);
  return Json(stamped);
}

namespace {

// ANSI SGR sequences (ECMA-48), added after GuardLines has made the text safe.
constexpr const char* kReset = "\033[0m";
constexpr const char* kBold = "\033[1m";

const char* SeverityColour(v1::Severity s) {
  switch (s) {
    case v1::ERROR:
      return "\033[1;31m";  // bold red
    case v1::WARNING:
      return "\033[1;33m";  // bold yellow
    default:
      return "\033[1;36m";  // bold cyan
  }
}

// A finding's text with its severity coloured and its headline in bold.
std::string Coloured(const v1::Finding& f, std::string text) {
  const size_t word = SeverityWord(f.severity()).size();
  const size_t colon = text.find("]: ");
  const size_t eol = text.find('\n');
  if (colon == std::string::npos || eol == std::string::npos || colon > eol) return text;
  text.insert(eol, kReset);
  text.insert(colon + 3, kBold);
  text.insert(word, kReset);
  text.insert(0, SeverityColour(f.severity()));
  return text;
}

}  // namespace

std::string ReportTail(const v1::Report& r, bool colour) {
  std::string out;
  for (const auto& n : r.notes()) out += text::GuardLines("note: " + n + "\n");
  const v1::Summary sum = Summarise(r);
  const uint32_t errors = sum.errors(), warnings = sum.warnings(), infos = sum.infos();
  if (sum.findings() == 0) return out + (colour ? "\033[32mno findings\033[0m\n" : "no findings\n");
  return out + fmt::format("{} error{}, {} warning{}, {} info\n", errors, errors == 1 ? "" : "s", warnings,
                           warnings == 1 ? "" : "s", infos);
}

std::string ReportText(const v1::Report& r, bool colour) {
  std::string out;
  for (const auto& f : r.findings()) out += (colour ? Coloured(f, FindingText(f)) : FindingText(f)) + "\n";
  return out + ReportTail(r, colour);
}

}  // namespace ldscope::render
