// Fuzz target: a trace file's bytes through the reader, the timeline model and both
// renderers (arbitrary events, absurd values included). The file read indexed (its
// events decoded as the model reads them, as `show` and `report` read files) must give
// the timeline of its events decoded up front; and `show`'s text, printed as the model
// hands over each process's entries once they are final (BuildTimeline with parts), must
// be the text of the whole timeline. And the analysis context made of the parts with
// the object table's rows (as `report` makes it) must be the one made of the whole
// timeline (tests/support/context_dump.h). Each indexed record's seq, read
// back from it, is its event's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <google/protobuf/util/message_differencer.h>

#include "analysis/context.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"
#include "support/context_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ldscope::store::TraceSet set;
  set.files.push_back(ldscope::store::ParseTrace("fuzz", data, size));
  const auto timeline = ldscope::model::BuildTimeline(set);
  ldscope::render::TextOptions opt;
  opt.timestamps = size % 2 == 0;
  opt.verbose = size % 3 == 0;
  const std::string whole = ldscope::render::TimelineText(timeline, opt);
  (void)ldscope::render::Json(timeline);
  ldscope::store::TraceSet indexed;
  indexed.files.push_back(ldscope::store::ParseTrace("fuzz", data, size, /*indexed=*/true));
  if (!google::protobuf::util::MessageDifferencer::Equals(ldscope::model::BuildTimeline(indexed), timeline))
    std::abort();
  // The index keeps no seqs: each record's, read back (store::SeqAt), is the decoded
  // event's, in seq order.
  for (const auto& s : indexed.files[0].streams) {
    ldscope::store::EventDecoder decoder(indexed.files[0], s);
    ldscope::v1::Event e;
    uint64_t last = 0;
    for (size_t i = 0; i < s.records.size(); ++i) {
      decoder.Decode(s.records[i], &e);
      const uint64_t seq = ldscope::store::SeqAt(indexed.files[0], s.records[i]);
      if (seq != e.seq() || seq < last) std::abort();
      last = seq;
    }
  }
  std::string streamed;
  const auto sink = [&](const std::string& piece) {
    streamed += piece;
    return true;
  };
  ldscope::render::ProcessTextWriter w(opt, sink);
  ldscope::v1::Timeline rest;
  ldscope::model::BuildTimeline(indexed, &rest, [&](const ldscope::v1::ProcessTimeline& p, bool complete) {
    return complete ? w.Complete(p) : w.Part(p);
  });
  (void)ldscope::render::TimelineTailText(rest, opt, sink);
  if (streamed != whole) std::abort();
  const ldscope::analysis::Context of_whole(timeline);
  ldscope::v1::Timeline parts;
  ldscope::analysis::Context of_parts(&parts);
  ldscope::model::BuildTimeline(
      indexed, &parts,
      [&](const ldscope::v1::ProcessTimeline& p, bool complete) { return of_parts.AddPart(p, complete); },
      /*with_objects=*/true);
  if (ldscope::testing::ContextDump(of_parts) != ldscope::testing::ContextDump(of_whole)) std::abort();
  return 0;
}
