// Fuzz target: a trace file's bytes through the reader, the timeline model and both
// renderers (arbitrary events, absurd values included). The file read indexed (its
// events decoded as the model reads them, as `show` and `report` read files) must give
// the timeline of its events decoded up front.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <google/protobuf/util/message_differencer.h>

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
  ldscope::store::TraceSet indexed;
  indexed.files.push_back(ldscope::store::ParseTrace("fuzz", data, size, /*indexed=*/true));
  if (!google::protobuf::util::MessageDifferencer::Equals(ldscope::model::BuildTimeline(indexed), timeline))
    std::abort();
  return 0;
}
