// A protobuf wire-format writer into a fixed caller-owned buffer, for the audit
// library's hot path: no heap, no exceptions, no libc beyond memcpy. When a field does
// not fit it is skipped whole and `truncated()` turns true, so the output always parses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ldscope::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Bytes a varint of this value takes.
constexpr size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Reads the varint at data[*pos] and advances *pos; false when it runs past size or over
// 10 bytes. The one reader of varints (the trace file's record lengths, the collector's
// batch datagrams), beside the one writer above.
inline bool ReadVarint(const uint8_t* data, size_t size, size_t* pos, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= size) return false;
    const uint8_t b = data[(*pos)++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

// A field's tag: its number and wire type, as the varint that precedes its value.
constexpr uint64_t Tag(uint32_t field, WireType t) {
  return (static_cast<uint64_t>(field) << 3) | t;
}

class Writer {
 public:
  // Nested messages reserve this many bytes for their length (a padded varint,
  // which every protobuf parser accepts), so they can be written in one pass.
  static constexpr size_t kNestedLenBytes = 3;
  static constexpr size_t kMaxNested = (1u << 21) - 1;
  static constexpr size_t kMaxVarint = 10;

  Writer(uint8_t* buf, size_t cap) : begin_(buf), pos_(buf), end_(buf + cap) {}

  size_t size() const { return static_cast<size_t>(pos_ - begin_); }
  const uint8_t* data() const { return begin_; }
  bool truncated() const { return truncated_; }
  void MarkTruncated() { truncated_ = true; }
  // Holds up to n bytes back from everything written until Unreserve: room for a field
  // that must come last (the truncated flag of an event that filled its buffer).
  // Returns the bytes held back, for Unreserve.
  size_t Reserve(size_t n) {
    const size_t room = static_cast<size_t>(end_ - pos_);
    const size_t held = room < n ? room : n;
    end_ -= held;
    return held;
  }
  void Unreserve(size_t held) { end_ += held; }

  void Varint(uint32_t field, uint64_t v) {
    const uint64_t tag = Tag(field, kVarint);
    if (static_cast<size_t>(end_ - pos_) >= 2 * kMaxVarint) {  // the common case: room
      pos_ = PutVarint(PutVarint(pos_, tag), v);
      return;
    }
    if (!Room(VarintSize(tag) + VarintSize(v))) return;
    pos_ = PutVarint(pos_, tag);
    pos_ = PutVarint(pos_, v);
  }
  // proto3 skips default values; so do we, to keep events small.
  void VarintNonZero(uint32_t field, uint64_t v) {
    if (v != 0) Varint(field, v);
  }
  void SignedAsVarint(uint32_t field, int64_t v) {  // int32/int64 (two's complement)
    VarintNonZero(field, static_cast<uint64_t>(v));
  }
  void Bool(uint32_t field, bool v) {
    if (v) Varint(field, 1);
  }

  // Writes at most max_len bytes of s; a longer string is cut and flagged.
  void Bytes(uint32_t field, const void* s, size_t len, size_t max_len = SIZE_MAX) {
    if (len > max_len) {
      len = max_len;
      truncated_ = true;
    }
    const uint64_t tag = Tag(field, kLengthDelimited);
    const size_t head = VarintSize(tag) + VarintSize(len);
    if (!Room(head + len)) {
      // Keep as much of the string as fits rather than nothing, when it is big.
      const size_t room = static_cast<size_t>(end_ - pos_);
      if (room > head + 64 && len > 64) {
        len = room - head;
        truncated_ = true;
      } else {
        return;
      }
    }
    pos_ = PutVarint(pos_, tag);
    pos_ = PutVarint(pos_, len);
    if (len) std::memcpy(pos_, s, len);
    pos_ += len;
  }
  // One bytes field of a then b, written whole or not at all.
  void Bytes2(uint32_t field, const void* a, size_t alen, const void* b, size_t blen) {
    const uint64_t tag = Tag(field, kLengthDelimited);
    if (!Room(VarintSize(tag) + VarintSize(alen + blen) + alen + blen)) return;
    pos_ = PutVarint(pos_, tag);
    pos_ = PutVarint(pos_, alen + blen);
    if (alen) std::memcpy(pos_, a, alen);
    pos_ += alen;
    if (blen) std::memcpy(pos_, b, blen);
    pos_ += blen;
  }
  void String(uint32_t field, const char* s, size_t max_len = SIZE_MAX) {
    if (s != nullptr) Bytes(field, s, std::strlen(s), max_len);
  }
  void StringNonEmpty(uint32_t field, const char* s, size_t max_len = SIZE_MAX) {
    if (s != nullptr && *s != '\0') String(field, s, max_len);
  }

  // Begin a nested message; returns a token for EndNested, or nullptr when there
  // is no room (then every write up to EndNested is silently dropped).
  struct Nested {
    uint8_t* len_at;
    uint8_t* saved_end;
  };
  Nested BeginNested(uint32_t field) {
    const uint64_t tag = Tag(field, kLengthDelimited);
    if (!Room(VarintSize(tag) + kNestedLenBytes)) {
      Nested n{nullptr, end_};
      end_ = pos_;  // nothing fits until EndNested
      return n;
    }
    pos_ = PutVarint(pos_, tag);
    Nested n{pos_, end_};
    pos_ += kNestedLenBytes;
    return n;
  }
  void EndNested(const Nested& n) {
    if (n.len_at == nullptr) {
      end_ = n.saved_end;
      return;
    }
    size_t len = static_cast<size_t>(pos_ - (n.len_at + kNestedLenBytes));
    uint8_t* p = n.len_at;
    for (size_t i = 0; i + 1 < kNestedLenBytes; ++i) {
      *p++ = static_cast<uint8_t>((len & 0x7f) | 0x80);
      len >>= 7;
    }
    *p = static_cast<uint8_t>(len & 0x7f);
  }

 private:
  bool Room(size_t n) {
    if (static_cast<size_t>(end_ - pos_) >= n) return true;
    truncated_ = true;
    return false;
  }

  uint8_t* begin_;
  uint8_t* pos_;
  uint8_t* end_;
  bool truncated_ = false;
};

}  // namespace ldscope::wire
