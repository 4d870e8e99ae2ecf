// `ldscope show`: print the per-process timeline of one or more traces.
#include <cstdio>

#include "cli/commands.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"
#include "text/strings.h"

namespace ldscope::cli {

int Show(const ShowOptions& opt) {
  if (RefuseTooLarge(opt.traces)) return kUsage;
  store::TraceSet traces = store::LoadTracesIndexed(opt.traces);
  google::protobuf::Arena arena(model::TimelineArenaOptions());
  v1::Timeline& timeline = *model::ArenaTimeline(&arena);
  bool written = true;
  render::TextOptions t;
  t.timestamps = opt.timestamps;
  t.verbose = opt.verbose;
  t.problems = false;  // problems go to stderr, after everything readable
  auto sink = [](const std::string& piece) { return Print(stdout, piece); };
  if (opt.format == "json") {
    model::BuildTimeline(traces, &timeline);
  } else {
    // Each process printed as it is built: its entries as soon as they are final.
    render::ProcessTextWriter w(t, sink);
    // Once the output fails (a closed pipe: `show | head`), nothing more is built.
    model::BuildTimeline(traces, &timeline, [&](const v1::ProcessTimeline& p, bool complete) {
      written = complete ? w.Complete(p) : w.Part(p);
      return written;
    });
  }
  store::DropEvents(&traces);  // all the timeline needed of them
  if (opt.format == "json") {
    written = Print(stdout, render::ProtoJson(render::ShownTimeline(timeline)));
  } else if (written) {
    written = render::TimelineTailText(timeline, t, sink);
  }
  for (const auto& p : timeline.problems()) {
    if (p.file().empty())
      Complain(p.message());
    else if (p.offset() == 0)  // nothing of it could be read
      Complain(p.file() + ": " + p.message());
    else
      Complain(text::DamageText(p.file(), p.offset(), p.message()) + " (everything before it is shown)");
  }
  if (!store::AnyReadable(traces)) return NoTrace();
  if (!written) return kWriteFailed;
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
