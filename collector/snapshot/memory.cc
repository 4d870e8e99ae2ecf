// See memory.h.
#include "snapshot/memory.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ldscope::snapshot {

Memory::~Memory() {
  if (mem_fd_ >= 0) close(mem_fd_);
}

bool Memory::ReadMem(uint64_t addr, void* out, size_t len) {
  if (mem_fd_ < 0) {
    mem_fd_ = open(fmt::format("/proc/{}/mem", pid_).c_str(), O_RDONLY | O_CLOEXEC);
    if (mem_fd_ < 0) {
      errno_ = errno;
      return false;
    }
  }
  size_t done = 0;
  while (done < len) {
    const ssize_t n = pread(mem_fd_, static_cast<char*>(out) + done, len - done, static_cast<off_t>(addr + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      errno_ = n < 0 ? errno : EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool Memory::Read(uint64_t addr, void* out, size_t len) {
  ++reads_;
  if (len == 0) return true;
  if (addr + len < addr) {  // wraps: no such range
    errno_ = EFAULT;
    return false;
  }
  if (use_mem_) return ReadMem(addr, out, len);
  iovec local{out, len}, remote{reinterpret_cast<void*>(addr), len};
  const ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(len)) return true;
  if (n < 0 && errno == ENOSYS) {
    use_mem_ = true;
    return ReadMem(addr, out, len);
  }
  errno_ = n < 0 ? errno : EFAULT;
  return false;
}

bool Memory::ReadMany(const std::vector<std::pair<uint64_t, size_t>>& pieces, std::vector<std::string>* out) {
  out->assign(pieces.size(), std::string());
  if (use_mem_) {
    for (size_t i = 0; i < pieces.size(); ++i) {
      (*out)[i].resize(pieces[i].second);
      if (!Read(pieces[i].first, (*out)[i].data(), pieces[i].second)) return false;
    }
    return true;
  }
  // IOV_MAX (1024) pieces per call.
  for (size_t at = 0; at < pieces.size(); at += 1024) {
    const size_t n = std::min<size_t>(1024, pieces.size() - at);
    std::vector<iovec> local(n), remote(n);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto& [addr, len] = pieces[at + i];
      (*out)[at + i].resize(len);
      local[i] = {(*out)[at + i].data(), len};
      remote[i] = {reinterpret_cast<void*>(addr), len};
      total += len;
    }
    ++reads_;
    const ssize_t got = process_vm_readv(pid_, local.data(), n, remote.data(), n, 0);
    if (got < 0 && errno == ENOSYS) {
      use_mem_ = true;
      return ReadMany(pieces, out);
    }
    if (got != static_cast<ssize_t>(total)) {
      errno_ = got < 0 ? errno : EFAULT;
      return false;
    }
  }
  return true;
}

bool Memory::ReadString(uint64_t addr, size_t max, std::string* out, bool* cut) {
  out->clear();
  if (cut != nullptr) *cut = false;
  constexpr uint64_t kPage = 4096;
  char buf[kPage];
  while (out->size() < max) {
    const uint64_t at = addr + out->size();
    const size_t n = std::min<size_t>(kPage - at % kPage, max - out->size());
    if (!Read(at, buf, n)) return !out->empty();
    const void* nul = std::memchr(buf, '\0', n);
    if (nul != nullptr) {
      out->append(buf, static_cast<const char*>(nul) - buf);
      return true;
    }
    out->append(buf, n);
  }
  if (cut != nullptr) *cut = true;
  return true;
}

std::vector<Mapping> ReadMaps(pid_t pid, std::string* error) {
  std::vector<Mapping> maps;
  const std::string name = fmt::format("/proc/{}/maps", pid);
  std::ifstream in(name);
  if (!in) {
    *error = fmt::format("cannot read {}: {}", name, std::strerror(errno));
    return maps;
  }
  std::string line;
  while (std::getline(in, line)) {
    // start-end perms offset major:minor inode   path
    Mapping m;
    unsigned maj = 0, min = 0;
    char perms[8] = {};
    unsigned long long start = 0, end = 0, offset = 0, ino = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset, &maj, &min, &ino,
                    &used) < 7)
      continue;
    m.start = start;
    m.end = end;
    m.offset = offset;
    m.dev = makedev(maj, min);
    m.ino = ino;
    m.exec = perms[2] == 'x';
    if (used > 0 && static_cast<size_t>(used) <= line.size()) m.path = line.substr(static_cast<size_t>(used));
    maps.push_back(std::move(m));
  }
  if (maps.empty()) *error = fmt::format("{} is empty (a kernel thread, or a process that ended)", name);
  return maps;
}

const Mapping* MappingAt(const std::vector<Mapping>& maps, uint64_t addr) {
  auto it = std::upper_bound(maps.begin(), maps.end(), addr, [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == maps.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

}  // namespace ldscope::snapshot
