// The collector's side of a traced process's event ring (audit/ring.h). The ring is
// untrusted input: its writer, or any process of the same user that holds the memfd,
// may store anything anywhere at any time. So the reader keeps its own count of what it
// consumed (the shared `tail` is only ever stored), takes no pointer from the ring,
// checks every count and length before it copies, copies each record out of the shared
// memory before anything parses it, and reads a bounded number of records per call. A
// ring that breaks the layout is reported as corrupt: the server counts it and lets the
// connection go, never crashes or waits on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ring.h"
#include "text/result.h"

namespace ldscope::ipc {

class RingReader {
 public:
  // Maps the descriptor an announce datagram carried (the caller closes it): a sealed
  // memfd (it cannot shrink under the mapping) of the ring's size whose header names
  // the layout. Else an error saying what is wrong.
  static Result<std::unique_ptr<RingReader>> Attach(int fd);
  // Over memory the caller owns (tests, the fuzzer, benchmarks): bytes must be
  // ring::kFileBytes long and stay valid while the reader lives.
  RingReader(uint8_t* base, bool owned);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  enum class Drained { kOk, kCorrupt, kRejected };
  // Reads up to max_records whole records, calling take(data, size) with a private
  // copy of each (valid until the next call). kRejected when take returned false (the
  // records before it are consumed), kCorrupt when the ring's counts or a length are
  // impossible. *records counts the records taken.
  template <typename Take>
  Drained Drain(size_t max_records, Take&& take, size_t* records);
  // Whether the writer published more than was read (one load).
  bool Pending() const;
  // Says to the writer that this ring is read no more (its next event opens a new
  // connection and ring). Done once the connection ended.
  void Detach();

 private:
  ring::Header* header_;
  const uint8_t* data_;
  bool owned_;
  uint64_t tail_ = 0;  // our own count of consumed bytes
  uint64_t records_ = 0;
  std::vector<uint8_t> copy_;
  // The record at tail_ (checked against avail): its length, or 0 when corrupt.
  size_t Next(uint64_t avail);
  static uint64_t NowNs();
};

template <typename Take>
RingReader::Drained RingReader::Drain(size_t max_records, Take&& take, size_t* records) {
  *records = 0;
  __atomic_store_n(&header_->visited_ns, NowNs(), __ATOMIC_RELAXED);
  const uint64_t head = __atomic_load_n(&header_->head, __ATOMIC_ACQUIRE);
  uint64_t avail = head - tail_;
  if (avail > ring::kCapacity || avail % 8 != 0) return Drained::kCorrupt;
  Drained result = Drained::kOk;
  while (avail != 0 && *records < max_records) {
    const size_t len = Next(avail);
    if (len == 0) {
      result = Drained::kCorrupt;
      break;
    }
    const uint64_t used = ring::RecordBytes(len);
    tail_ += used;
    avail -= used;
    ++*records;
    if (!take(copy_.data(), len)) {
      result = Drained::kRejected;
      break;
    }
  }
  records_ += *records;
  __atomic_store_n(&header_->tail_records, records_, __ATOMIC_RELAXED);
  __atomic_store_n(&header_->tail, tail_, __ATOMIC_RELEASE);
  if (avail == 0) __atomic_store_n(&header_->wake, 0u, __ATOMIC_RELAXED);
  return result;
}

}  // namespace ldscope::ipc
