// `ldscope export --chrome TRACE -o out.json`: the timeline as a Chrome trace.
#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/output_file.h"
#include "store/trace_file.h"

namespace ldscope::cli {

int Export(const ExportOptions& opt) {
  if (std::string e = RefuseOverwrite(opt.output, opt.traces); !e.empty()) {
    Complain(e);
    return kUsage;
  }
  const store::TraceSet traces = store::LoadTraces(opt.traces);
  for (const auto& e : traces.errors) Complain(e);
  for (const auto& f : traces.files)
    if (!store::Readable(f)) Complain(fmt::format("{}: {}", f.problem.file, f.problem.message));
  if (!store::AnyReadable(traces)) return NoTrace();
  const v1::Timeline timeline = model::BuildTimeline(traces);
  for (const auto& p : timeline.problems())
    if (!p.file().empty() && p.offset() > 0)
      Complain(fmt::format("{}: at byte offset {}: {} (exporting what precedes it)", p.file(),
                           p.offset(), p.message()));
  const elf::TraceFacts facts = analysis::FactsOf(traces);
  const std::string json = render::ChromeTrace(timeline, analysis::Analyze(timeline, &facts));
  if (std::string e = store::WriteTextFile(opt.output, json); !e.empty()) {
    Complain(e);
    return kWriteFailed;
  }
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
