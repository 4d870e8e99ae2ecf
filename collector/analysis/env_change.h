// The new value of a variable that an environment fix changes (Fix.env), computed from
// the process's recorded environment, for the passes that make such fixes.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/context.h"
#include "analysis/finding_builder.h"
#include "loader/search.h"

namespace ldscope::analysis {

// The process's LD_LIBRARY_PATH without the elements that name dir (relative and empty
// ones taken from its working directory); *dropped says whether one did.
inline std::string LdLibraryPathWithout(const ProcessIndex& pi, const std::string& dir, bool* dropped) {
  std::vector<std::string> kept;
  for (const auto& d : loader::SplitSearchPath(EnvOf(*pi.p, "LD_LIBRARY_PATH"))) {
    if (NormalPath(!d.empty() && (d.front() == '/' || pi.env.cwd.empty()) ? d : pi.env.cwd + "/" + d) == dir)
      *dropped = true;
    else
      kept.push_back(d);
  }
  return fmt::format("{}", fmt::join(kept, ":"));
}

// The fix that drops dir from LD_LIBRARY_PATH, with the variable's new value when dir is
// one of its elements.
inline void DropFromLdLibraryPathFix(const ProcessIndex& pi, const std::string& dir, std::string text,
                                     FindingBuilder* f) {
  bool dropped = false;
  const std::string kept = LdLibraryPathWithout(pi, dir, &dropped);
  if (dropped)
    f->Fix(v1::FIX_DROP_FROM_LD_LIBRARY_PATH, text::ShowBytes(text), "LD_LIBRARY_PATH", kept);
  else
    f->Fix(v1::FIX_DROP_FROM_LD_LIBRARY_PATH, text::ShowBytes(text));
}

// The process's LD_PRELOAD without entry (ld.so splits it at ':' and ' '); *dropped
// says whether it was there.
inline std::string LdPreloadWithout(const ProcessIndex& pi, const std::string& entry, bool* dropped) {
  std::vector<std::string> kept;
  for (const auto& e : loader::SplitPath(EnvOf(*pi.p, "LD_PRELOAD"), ": ")) {
    if (e == entry)
      *dropped = true;
    else
      kept.push_back(e);
  }
  return fmt::format("{}", fmt::join(kept, ":"));
}

}  // namespace ldscope::analysis
