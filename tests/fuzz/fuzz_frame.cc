// Fuzz target: one datagram through the collector's frame decoder (split into its
// events when it is a batch, converted when it is the Python hook's marshal format,
// each event checked), then the accepted events through the
// model as one stream.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ipc/server.h"
#include "model/timeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<ldscope::ipc::FrameSlice> slices;
  std::vector<std::string> owned;  // the Python hook's format, converted
  if (!ldscope::ipc::SplitDatagram(data, size, &owned, &slices)) return 0;
  ldscope::store::TraceSet set;
  ldscope::store::TraceFile f;
  f.header.set_format_version(1);
  for (const auto& s : slices) {
    ldscope::v1::Event e;
    if (!ldscope::ipc::ParseFrame(s.data, s.size, &e)) break;  // the server stops here too
    e.set_stream(1);
    f.events.push_back(e);
  }
  if (f.events.empty()) return 0;
  set.files.push_back(f);
  (void)ldscope::model::BuildTimeline(set);
  return 0;
}
