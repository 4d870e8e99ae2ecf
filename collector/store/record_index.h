// The offsets of a stream's event records in a trace file, kept compactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ldscope::store {

// Where the event records of one stream lie in the file's bytes (the offset of each
// one's length prefix), in the stream's order, about 2 bytes a record. The offsets are
// kept in chunks of 65,536, each in the first form that holds all of its offsets:
// 2 bytes each above a base per 64 records (a stream's records lie close together in a
// file), else 4 bytes within one 4 GiB segment of the file, else 8 bytes. A chunk
// never grows by more than itself, so the index is never copied whole as it grows. A
// record's sequence number is not kept: SeqAt reads it back from the record.
class RecordIndex {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint64_t operator[](size_t i) const {
    const Chunk& c = chunks_[i >> kShift];
    const size_t j = i & kMask;
    switch (c.form) {
      case Chunk::kSmall:
        return c.bases[j >> kBaseShift] + c.small[j];
      case Chunk::kNarrow:
        return (c.segment << 32) | c.narrow[j];
      default:
        return c.wide[j];
    }
  }
  uint64_t front() const { return (*this)[0]; }
  void push_back(uint64_t at);
  // Frees the last chunk's spare room (call when the index is complete).
  void shrink_to_fit();
  // The bytes held (for tests and benchmarks).
  size_t bytes() const;

 private:
  static constexpr unsigned kShift = 16, kBaseShift = 6;
  static constexpr size_t kMask = (size_t{1} << kShift) - 1;
  struct Chunk {
    enum Form : uint8_t { kSmall, kNarrow, kWide } form = kSmall;
    std::vector<uint64_t> bases;   // kSmall: the first offset of each 64 records
    std::vector<uint16_t> small;   // kSmall: each offset above its base
    uint64_t segment = 0;          // kNarrow: the high 32 bits of the offsets
    std::vector<uint32_t> narrow;  // kNarrow: the low 32 bits
    std::vector<uint64_t> wide;    // kWide: whole offsets
  };
  // The chunk's offsets so far, whole.
  static std::vector<uint64_t> Whole(const Chunk& c);
  std::vector<Chunk> chunks_;
  size_t size_ = 0;
};

}  // namespace ldscope::store
