// `ldscope export --chrome TRACE -o out.json`: the timeline as a Chrome trace.
#include <fstream>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"

namespace ldscope::cli {

int Export(const ExportOptions& opt) {
  const store::TraceSet traces = store::LoadTraces(opt.traces);
  for (const auto& e : traces.errors) Complain(e);
  if (traces.files.empty()) return kUsage;
  const v1::Timeline timeline = model::BuildTimeline(traces);
  for (const auto& p : timeline.problems())
    if (!p.file().empty())
      Complain(fmt::format("{}: at byte offset {}: {} (exporting what precedes it)", p.file(),
                           p.offset(), p.message()));
  const std::string json = render::ChromeTrace(timeline, analysis::Analyze(timeline));
  std::ofstream out(opt.output, std::ios::trunc);
  out << json;
  if (!out) {
    Complain("cannot write " + opt.output);
    return kUsage;
  }
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
