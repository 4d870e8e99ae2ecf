// Another process's memory, read without stopping it (process_vm_readv, else
// /proc/PID/mem), and its mappings (/proc/PID/maps). Internal to the snapshot layer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ldscope::snapshot {

class Memory {
 public:
  explicit Memory(pid_t pid) : pid_(pid) {}
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // Reads len bytes at addr; false (errno in last_errno()) unless every byte was read.
  bool Read(uint64_t addr, void* out, size_t len);
  template <typename T>
  bool ReadValue(uint64_t addr, T* out) {
    return Read(addr, out, sizeof *out);
  }
  // A NUL-terminated string of at most max bytes at addr, read page by page (a string
  // that ends just before an unmapped page is read whole). false when its first byte
  // cannot be read; *cut when no NUL came within max bytes.
  bool ReadString(uint64_t addr, size_t max, std::string* out, bool* cut = nullptr);
  // Several pieces at once (one system call): each {addr, len} into out[i] (resized).
  // false when any could not be read whole.
  bool ReadMany(const std::vector<std::pair<uint64_t, size_t>>& pieces, std::vector<std::string>* out);
  int last_errno() const { return errno_; }
  // "process_vm_readv" or "/proc/PID/mem": how the last read was made.
  const char* how() const { return use_mem_ ? "/proc/PID/mem" : "process_vm_readv"; }
  uint64_t reads() const { return reads_; }

 private:
  bool ReadMem(uint64_t addr, void* out, size_t len);
  pid_t pid_;
  int mem_fd_ = -1;
  bool use_mem_ = false;  // process_vm_readv is not available (ENOSYS, a seccomp filter)
  int errno_ = 0;
  uint64_t reads_ = 0;
};

struct Mapping {
  uint64_t start = 0, end = 0, offset = 0;
  uint64_t dev = 0, ino = 0;
  bool exec = false;
  std::string path;  // "" for anonymous; "[vdso]", "[stack]"; " (deleted)" kept
};

// /proc/PID/maps, in address order. An error text in *error when it cannot be read.
std::vector<Mapping> ReadMaps(pid_t pid, std::string* error);
// The mapping that holds addr, or nullptr.
const Mapping* MappingAt(const std::vector<Mapping>& maps, uint64_t addr);

}  // namespace ldscope::snapshot
