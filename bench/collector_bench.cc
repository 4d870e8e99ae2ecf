// Collector throughput on one core: every event of a real trace decoded (the frame
// checks the server applies) and stored (appended to a trace file), repeatedly; the
// same events read from an event ring (ipc/ring_reader.h: the records taken out of the
// ring with every check, as the server's loop does, then split; and then also decoded
// and stored); then the timeline model over the same trace. Prints events/s and the
// stored bytes per event (as in the file, stream number included).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <cstdio>
#include <string>
#include <vector>

#include "ipc/ring_reader.h"
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
  // From a ring: the audit library's part (filling it) is not timed, only the reads.
  std::vector<uint8_t> mem(ldscope::ring::kFileBytes);
  auto* rh = reinterpret_cast<ldscope::ring::Header*>(mem.data());
  uint8_t* rdata = mem.data() + ldscope::ring::kHeaderBytes;
  ldscope::ipc::RingReader reader(mem.data(), false);
  std::vector<ldscope::ipc::FrameSlice> slices;
  auto ring_rate = [&](bool store) {
    size_t events = 0, next = 0;
    double read_secs = 0;
    while (read_secs < 2.0) {
      // Fill what room there is, as the writer would.
      for (;;) {
        const std::string& f = frames[next];
        const uint64_t need = ldscope::ring::RecordBytes(f.size());
        if (ldscope::ring::kCapacity - (rh->head - rh->tail) < need) break;
        const size_t at = rh->head % ldscope::ring::kCapacity;
        const uint32_t len = static_cast<uint32_t>(f.size());
        std::memcpy(rdata + at, &len, 4);
        const size_t pos = at + 4, first = std::min<size_t>(len, ldscope::ring::kCapacity - pos);
        std::memcpy(rdata + pos, f.data(), first);
        std::memcpy(rdata, f.data() + first, len - first);
        __atomic_store_n(&rh->head, rh->head + need, __ATOMIC_RELEASE);
        next = (next + 1) % frames.size();
      }
      const auto r0 = std::chrono::steady_clock::now();
      size_t records = 0;
      reader.Drain(
          1 << 20,
          [&](const uint8_t* d, size_t size) {
            if (!ldscope::ipc::SplitFrame(d, size, &slices)) return false;
            if (store) {
              for (const auto& sl : slices) {
                ldscope::v1::Event e;
                if (ldscope::ipc::ParseFrame(sl.data, sl.size, &e))
                  w.AppendEvent(sl.data, sl.size, 1).IgnoreError();  // /dev/null
              }
            }
            return true;
          },
          &records);
      read_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      events += records;
    }
    return events / read_secs;
  };
  const double ring_read = ring_rate(false);
  const double ring_stored = ring_rate(true);
  w.Close().IgnoreError();  // /dev/null: nothing to lose
  const auto m0 = std::chrono::steady_clock::now();
  ldscope::store::TraceSet set;
  set.files.push_back(t);
  const auto timeline = ldscope::model::BuildTimeline(set);
  const double model_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
  std::printf("events_per_s %.0f\n", n / secs);
  std::printf("ring_read_events_per_s %.0f\n", ring_read);
  std::printf("ring_stored_events_per_s %.0f\n", ring_stored);
  std::printf("bytes_per_event %.1f\n", static_cast<double>(all_bytes) / frames.size());
  std::printf("bytes_per_search_event %.1f\n", searches ? static_cast<double>(search_bytes) / searches : 0.0);
  std::printf("search_events %zu of %zu\n", searches, frames.size());
  std::printf("model_events_per_s %.0f\n", frames.size() / model_secs);
  return timeline.processes_size() > 0 ? 0 : 1;
}
