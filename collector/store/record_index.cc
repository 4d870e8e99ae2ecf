// See record_index.h.
#include "store/record_index.h"

#include <algorithm>

namespace ldscope::store {

std::vector<uint64_t> RecordIndex::Whole(const Chunk& c) {
  std::vector<uint64_t> out;
  switch (c.form) {
    case Chunk::kSmall:
      out.reserve(c.small.capacity());
      for (size_t j = 0; j < c.small.size(); ++j) out.push_back(c.bases[j >> kBaseShift] + c.small[j]);
      break;
    case Chunk::kNarrow:
      out.reserve(c.narrow.capacity());
      for (const uint32_t lo : c.narrow) out.push_back(c.segment << 32 | lo);
      break;
    case Chunk::kWide:
      out = c.wide;
      break;
  }
  return out;
}

void RecordIndex::push_back(uint64_t at) {
  if ((size_ & kMask) == 0) chunks_.emplace_back();
  Chunk& c = chunks_.back();
  const size_t j = size_ & kMask;
  ++size_;
  if (c.form == Chunk::kSmall) {
    if ((j & ((size_t{1} << kBaseShift) - 1)) == 0) c.bases.push_back(at);
    const uint64_t base = c.bases.back();
    if (at >= base && at - base <= UINT16_MAX) {
      c.small.push_back(static_cast<uint16_t>(at - base));
      return;
    }
    // An offset too far from its base: the chunk's offsets 4 bytes each from now on, in
    // the segment of its first, or whole.
    std::vector<uint64_t> whole = Whole(c);
    whole.push_back(at);
    std::vector<uint64_t>().swap(c.bases);
    std::vector<uint16_t>().swap(c.small);
    c.segment = whole.front() >> 32;
    const bool one_segment = std::all_of(whole.begin(), whole.end(), [&](uint64_t v) { return v >> 32 == c.segment; });
    if (one_segment) {
      c.form = Chunk::kNarrow;
      c.narrow.reserve(std::max<size_t>(whole.capacity(), 16));
      for (const uint64_t v : whole) c.narrow.push_back(static_cast<uint32_t>(v));
    } else {
      c.form = Chunk::kWide;
      c.wide = std::move(whole);
    }
    return;
  }
  if (c.form == Chunk::kNarrow) {
    if (at >> 32 == c.segment) {
      c.narrow.push_back(static_cast<uint32_t>(at));
      return;
    }
    std::vector<uint64_t> whole = Whole(c);  // the chunk's first offset outside its segment
    std::vector<uint32_t>().swap(c.narrow);
    c.form = Chunk::kWide;
    c.wide = std::move(whole);
  }
  c.wide.push_back(at);
}

void RecordIndex::shrink_to_fit() {
  chunks_.shrink_to_fit();
  if (chunks_.empty()) return;
  Chunk& c = chunks_.back();
  c.bases.shrink_to_fit();
  c.small.shrink_to_fit();
  c.narrow.shrink_to_fit();
  c.wide.shrink_to_fit();
}

size_t RecordIndex::bytes() const {
  size_t n = chunks_.capacity() * sizeof(Chunk);
  for (const Chunk& c : chunks_)
    n += c.bases.capacity() * sizeof(uint64_t) + c.small.capacity() * sizeof(uint16_t) +
         c.narrow.capacity() * sizeof(uint32_t) + c.wide.capacity() * sizeof(uint64_t);
  return n;
}

}  // namespace ldscope::store
