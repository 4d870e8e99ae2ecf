// A trace file's bytes in memory: a copy, or a mapping guarded against the file being
// cut short while it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ldscope::store {

// The bytes of a trace file whose events are decoded as they are needed (a copy, or a
// mapping of the file).
class TraceBytes {
 public:
  TraceBytes(std::string copy)
      : copy_(std::move(copy)), data_(reinterpret_cast<const uint8_t*>(copy_.data())), size_(copy_.size()) {}
  // A mapping (unmapped when destroyed), guarded: a page past the end of a file another
  // program truncates meanwhile reads as zeros instead of killing the process (SIGBUS).
  TraceBytes(const uint8_t* map, size_t size);
  ~TraceBytes();
  TraceBytes(const TraceBytes&) = delete;
  TraceBytes& operator=(const TraceBytes&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // A mapping's pages read so far leave this process's memory (they are read again,
  // from the page cache, when needed): a big file is never resident as a whole.
  void Trim() const;
  // Where the mapped file was found cut short while it was read: an offset from which it
  // read as zeros at the latest (the start of the page before the first that faulted);
  // none when it was not (or for a copy).
  std::optional<uint64_t> CutAt() const;

 private:
  std::string copy_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  void* guard_ = nullptr;  // the mapping's guard (trace_bytes.cc)
};

}  // namespace ldscope::store
