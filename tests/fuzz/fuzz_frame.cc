// Fuzz target: one datagram through the collector's frame decoder, then (when
// accepted) through the model as a one-event stream.
#include <cstddef>
#include <cstdint>

#include "ipc/server.h"
#include "model/timeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ldscope::v1::Event e;
  if (!ldscope::ipc::ParseFrame(data, size, &e)) return 0;
  ldscope::store::TraceSet set;
  ldscope::store::TraceFile f;
  f.header.set_format_version(1);
  e.set_stream(1);
  f.events.push_back(e);
  set.files.push_back(f);
  (void)ldscope::model::BuildTimeline(set);
  return 0;
}
