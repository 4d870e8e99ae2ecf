// The report for people: per finding a headline, labelled evidence and fixes, most
// severe first per process.
#include <fmt/format.h>

#include "render/render.h"
#include "text/escape.h"

namespace ldscope::render {

const char* SeverityWord(v1::Severity s) {
  switch (s) {
    case v1::ERROR: return "error";
    case v1::WARNING: return "warning";
    case v1::INFO: return "info";
    default: return "note";
  }
}

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
    case v1::DLOPEN_REJECTED: return "dlopen-rejected";
    case v1::DLOPEN_NOT_FOUND: return "dlopen-not-found";
    case v1::RUNPATH_NOT_INHERITED: return "runpath-not-inherited";
    case v1::DLOPEN_OUT_OF_SCOPE: return "dlopen-out-of-scope";
    case v1::CUDA_DRIVER: return "cuda-driver";
    case v1::SIBLING_MISMATCH: return "sibling-mismatch";
    case v1::HOST_MISMATCH: return "host-mismatch";
    case v1::EMPTY_PATH_ELEMENT: return "empty-path-element";
    case v1::INCOMPATIBLE_LIBRARY: return "incompatible-library";
    case v1::PRELOAD_IGNORED: return "preload-ignored";
    case v1::MAP_FAILED: return "map-failed";
    case v1::NOT_A_LIBRARY: return "not-a-library";
    case v1::NEEDS_NEWER_GLIBC:
      return "needs-newer-glibc";
    case v1::STATIC_TLS_EXHAUSTED:
      return "static-tls-exhausted";
    case v1::EXECSTACK_REFUSED:
      return "execstack-refused";
    default: return "unknown";
  }
}

// `severity[kind]: headline`, the evidence as labelled lines, then the fixes: one line
// each, unwrapped, as compilers print diagnostics (paths stay whole for copying).
std::string FindingText(const v1::Finding& f) {
  std::string out = fmt::format("{}[{}]: {}\n", SeverityWord(f.severity()),
                                FindingKindName(f.kind()), f.headline());
  out += fmt::format("  process: {} ({}){}\n", f.pid(), f.exe(), f.host().empty() ? "" : " on host " + f.host());
  for (const auto& d : f.details()) out += fmt::format("  {}: {}\n", d.label(), d.text());
  for (const auto& x : f.fixes()) out += fmt::format("  fix: {}\n", x.text());
  return text::GuardLines(std::move(out));
}

std::string ReportText(const v1::Report& r) {
  std::string out;
  for (const auto& f : r.findings()) out += FindingText(f) + "\n";
  for (const auto& n : r.notes()) out += "note: " + n + "\n";
  size_t errors = 0, warnings = 0, infos = 0;
  for (const auto& f : r.findings()) {
    errors += f.severity() == v1::ERROR;
    warnings += f.severity() == v1::WARNING;
    infos += f.severity() == v1::INFO;
  }
  out += fmt::format("{} error{}, {} warning{}, {} info\n", errors, errors == 1 ? "" : "s", warnings,
                     warnings == 1 ? "" : "s", infos);
  return text::GuardLines(std::move(out));
}

}  // namespace ldscope::render
