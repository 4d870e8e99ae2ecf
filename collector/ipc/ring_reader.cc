// See ring_reader.h.
#include "ipc/ring_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ldscope::ipc {

Result<std::unique_ptr<RingReader>> RingReader::Attach(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Error{fmt::format("ring: fstat: {}", std::strerror(errno))};
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != ring::kFileBytes)
    return Error{fmt::format("ring: not a ring of {} bytes", ring::kFileBytes)};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) return Error{"ring: not sealed against shrinking"};
  void* p = mmap(nullptr, ring::kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Error{fmt::format("ring: mmap: {}", std::strerror(errno))};
  auto r = std::make_unique<RingReader>(static_cast<uint8_t*>(p), true);
  const uint64_t magic = __atomic_load_n(&r->header_->magic, __ATOMIC_RELAXED);
  const uint32_t version = __atomic_load_n(&r->header_->version, __ATOMIC_RELAXED);
  if (magic != ring::kMagic || version != ring::kVersion) return Error{"ring: unknown layout"};
  return r;
}

RingReader::RingReader(uint8_t* base, bool owned)
    : header_(reinterpret_cast<ring::Header*>(base)), data_(base + ring::kHeaderBytes), owned_(owned) {}

RingReader::~RingReader() {
  if (owned_) munmap(header_, ring::kFileBytes);
}

uint64_t RingReader::NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool RingReader::Pending() const { return __atomic_load_n(&header_->head, __ATOMIC_ACQUIRE) != tail_; }

void RingReader::Detach() { __atomic_store_n(&header_->detached, 1u, __ATOMIC_SEQ_CST); }

size_t RingReader::Next(uint64_t avail) {
  if (avail < 8) return 0;
  const size_t at = static_cast<size_t>(tail_ % ring::kCapacity);  // 8-aligned: avail and
                                                                   // every record are
  uint32_t len = 0;
  std::memcpy(&len, data_ + at, sizeof len);
  if (len == 0 || len > ring::kMaxRecord || ring::RecordBytes(len) > avail) return 0;
  const size_t pos = at + sizeof len;
  // Grown to the largest record seen (a short-lived process's are a few hundred bytes):
  // no 64 KiB allocated and cleared per ring.
  if (copy_.size() < len) copy_.resize(len);
  const size_t first = len < ring::kCapacity - pos ? len : ring::kCapacity - pos;
  std::memcpy(copy_.data(), data_ + pos, first);
  std::memcpy(copy_.data() + first, data_, len - first);
  return len;
}

}  // namespace ldscope::ipc
