// Collector throughput on one core: every event of a real trace decoded (the frame
// checks the server applies) and stored (appended to a trace file), repeatedly; then
// the timeline model over the same trace. Prints events/s and the stored bytes per
// event (as in the file, stream number included).
#include <chrono>
#include <fstream>
#include <iterator>
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
  if (!t.ok() || t.events.empty()) {
    std::fprintf(stderr, "collector_bench: cannot read %s\n", argv[1]);
    return 2;
  }
  // The records as stored (the audit library's datagrams plus the stream number the
  // collector appends), read raw: before the reader resolves anything.
  std::ifstream in(argv[1], std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> frames;
  size_t search_bytes = 0, searches = 0, all_bytes = 0;
  size_t pos = 0;
  bool header = true;
  while (pos < file.size()) {
    uint64_t len = 0;
    for (int shift = 0; pos < file.size(); shift += 7) {
      const uint8_t b = static_cast<uint8_t>(file[pos++]);
      len |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    const std::string rec = file.substr(pos, len);
    pos += len;
    if (header) {
      header = false;
      continue;
    }
    ldscope::v1::Event e;
    e.ParseFromString(rec);
    all_bytes += rec.size();
    if (e.has_search()) {
      search_bytes += rec.size();
      ++searches;
    }
    e.clear_stream();
    frames.push_back(e.SerializeAsString());
  }
  ldscope::store::TraceWriter w;
  ldscope::v1::TraceHeader h;
  h.set_format_version(1);
  if (!w.Open("/dev/null", h).ok()) return 1;
  const auto start = std::chrono::steady_clock::now();
  size_t n = 0;
  double secs = 0;
  while (secs < 2.0) {
    for (const auto& f : frames) {
      ldscope::v1::Event e;
      if (ldscope::ipc::ParseFrame(reinterpret_cast<const uint8_t*>(f.data()), f.size(), &e))
        w.AppendEvent(reinterpret_cast<const uint8_t*>(f.data()), f.size(), 1).IgnoreError();  // /dev/null
      ++n;
    }
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  w.Close().IgnoreError();  // /dev/null: nothing to lose
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
