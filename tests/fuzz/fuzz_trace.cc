// Fuzz target: a trace file's bytes through the reader, the timeline model and both
// renderers (arbitrary events, absurd values included).
#include <cstddef>
#include <cstdint>

#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ldscope::store::TraceSet set;
  set.files.push_back(ldscope::store::ParseTrace("fuzz", data, size));
  const auto timeline = ldscope::model::BuildTimeline(set);
  ldscope::render::TextOptions opt;
  (void)ldscope::render::TimelineText(timeline, opt);
  (void)ldscope::render::Json(timeline);
  return 0;
}
