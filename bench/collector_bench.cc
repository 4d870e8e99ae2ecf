// Collector throughput on one core: every event of a real trace decoded (the frame
// checks the server applies) and stored (appended to a trace file), repeatedly; then
// the timeline model over the same trace. Prints events/s and bytes/event.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ipc/server.h"
#include "model/timeline.h"
#include "store/trace_file.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: collector_bench TRACE\n");
    return 2;
  }
  auto t = ldscope::store::ReadTraceFile(argv[1]);
  if (!t.ok || t.events.empty()) {
    std::fprintf(stderr, "collector_bench: cannot read %s\n", argv[1]);
    return 2;
  }
  // The datagrams as the audit library sent them (no stream number).
  std::vector<std::string> frames;
  size_t search_bytes = 0, searches = 0, all_bytes = 0;
  for (auto e : t.events) {
    e.clear_stream();
    frames.push_back(e.SerializeAsString());
    all_bytes += frames.back().size();
    if (e.has_search()) {
      search_bytes += frames.back().size();
      ++searches;
    }
  }
  ldscope::store::TraceWriter w;
  ldscope::v1::TraceHeader h;
  h.set_format_version(1);
  w.Open("/dev/null", h);
  const auto start = std::chrono::steady_clock::now();
  size_t n = 0;
  double secs = 0;
  while (secs < 2.0) {
    for (const auto& f : frames) {
      ldscope::v1::Event e;
      if (ldscope::ipc::ParseFrame(reinterpret_cast<const uint8_t*>(f.data()), f.size(), &e))
        w.AppendEvent(reinterpret_cast<const uint8_t*>(f.data()), f.size(), 1);
      ++n;
    }
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  w.Close();
  const auto m0 = std::chrono::steady_clock::now();
  ldscope::store::TraceSet set;
  set.files.push_back(t);
  const auto timeline = ldscope::model::BuildTimeline(set);
  const double model_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
  std::printf("events_per_s %.0f\n", n / secs);
  std::printf("bytes_per_event %.1f\n", static_cast<double>(all_bytes) / frames.size());
  std::printf("bytes_per_search_event %.1f\n", searches ? static_cast<double>(search_bytes) / searches : 0.0);
  std::printf("search_events %zu of %zu\n", searches, frames.size());
  std::printf("model_events_per_s %.0f\n", frames.size() / model_secs);
  return timeline.processes_size() > 0 ? 0 : 1;
}
