// Fuzz target: the collector's reader of a traced process's event ring (ipc/ring_reader.h)
// over a ring whose every byte the input chooses: the first 8 bytes are the writer's
// `head`, the next 4 where in the data area the rest of the input lies (it wraps around
// the end), the rest the data. The reader is visited twice (a second visit after the first
// one's end, as the server's loop does), each record it takes split and parsed as the
// server does. It must neither crash nor read out of bounds, whatever the ring says.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ipc/ring_reader.h"
#include "ipc/server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<uint8_t> mem(ldscope::ring::kFileBytes);
  std::memset(mem.data(), 0, mem.size());
  if (size < 12) return 0;
  auto* h = reinterpret_cast<ldscope::ring::Header*>(mem.data());
  std::memcpy(&h->head, data, 8);
  uint32_t at = 0;
  std::memcpy(&at, data + 8, 4);
  uint8_t* ring = mem.data() + ldscope::ring::kHeaderBytes;
  for (size_t i = 12; i < size; ++i) ring[(at + (i - 12)) % ldscope::ring::kCapacity] = data[i];
  ldscope::ipc::RingReader reader(mem.data(), false);
  std::vector<ldscope::ipc::FrameSlice> slices;
  for (int visit = 0; visit < 2; ++visit) {
    size_t records = 0;
    const auto r = reader.Drain(
        4096,
        [&](const uint8_t* d, size_t n) {
          if (!ldscope::ipc::SplitFrame(d, n, &slices)) return false;
          for (const auto& s : slices) {
            ldscope::v1::Event e;
            if (!ldscope::ipc::ParseFrame(s.data, s.size, &e)) return false;
          }
          return true;
        },
        &records);
    if (r != ldscope::ipc::RingReader::Drained::kOk) break;
  }
  return 0;
}
