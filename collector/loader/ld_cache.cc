// See ld_cache.h. Layout from glibc's sysdeps/generic/dl-cache.h.
#include "loader/ld_cache.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "text/escape.h"

namespace ldscope::loader {
namespace {

constexpr char kOldMagic[] = "ld.so-1.7.0";
constexpr char kNewMagic[] = "glibc-ld.so.cache1.1";
constexpr size_t kNewHeader = 48;   // magic[17] version[3] nlibs len_strings flags pad[3] ext unused[3]
constexpr size_t kNewEntry = 24;    // flags key value osversion hwcap
constexpr int32_t kTypeMask = 0x00ff, kElfLibc6 = 0x0003;
constexpr int32_t kArchMask = 0xff00, kX8664Lib64 = 0x0300;

template <typename T>
bool Read(const std::string& d, size_t off, T* out) {
  if (off > d.size() || sizeof(T) > d.size() - off) return false;
  std::memcpy(out, d.data() + off, sizeof(T));
  return true;
}

std::string CStr(const std::string& d, size_t off) {
  if (off >= d.size()) return "";
  const size_t end = d.find('\0', off);
  return d.substr(off, end == std::string::npos ? std::string::npos : end - off);
}

}  // namespace

Status LdCache::Load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Ok();
  std::stringstream ss;
  ss << f.rdbuf();
  if (Status s = LoadFromMemory(ss.str()); !s.ok()) return Error{text::Escape(path) + ": " + s.error()};
  return Status::Ok();
}

Status LdCache::LoadFromMemory(const std::string& d) {
  size_t base = 0;
  if (d.compare(0, sizeof kOldMagic - 1, kOldMagic) == 0) {
    uint32_t nold = 0;
    if (!Read(d, 12, &nold)) return Error{"truncated ld.so.cache"};
    base = 16 + size_t{nold} * 12;
    base = (base + 7) & ~size_t{7};
  }
  if (base > d.size() || d.compare(base, sizeof kNewMagic - 1, kNewMagic) != 0)
    return Error{"unknown ld.so.cache format"};
  uint32_t nlibs = 0;
  if (!Read(d, base + 20, &nlibs)) return Error{"truncated ld.so.cache"};
  for (uint32_t i = 0; i < nlibs; ++i) {
    const size_t e = base + kNewHeader + size_t{i} * kNewEntry;
    int32_t flags;
    uint32_t key, value;
    uint64_t hwcap;
    if (!Read(d, e, &flags) || !Read(d, e + 4, &key) || !Read(d, e + 8, &value) ||
        !Read(d, e + 16, &hwcap))
      return Error{"truncated ld.so.cache"};
    if ((flags & kTypeMask) != kElfLibc6 || (flags & kArchMask) != kX8664Lib64) continue;
    // Entries for glibc-hwcaps subdirectories carry a hwcap index; the plain one is
    // what every CPU gets, so it wins when both exist.
    const std::string name = CStr(d, base + key);
    const std::string path = CStr(d, base + value);
    if (name.empty() || path.empty()) continue;
    auto it = entries_.find(name);
    if (it == entries_.end() || hwcap == 0) entries_[name] = path;
  }
  return Status::Ok();
}

std::string LdCache::Lookup(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? "" : it->second;
}

}  // namespace ldscope::loader
