// Reads /etc/ld.so.cache (glibc's "glibc-ld.so.cache1.1" format, with or without the
// old "ld.so-1.7.0" part in front) to answer the cache step of a library search.
#pragma once

#include <string>
#include <unordered_map>

#include "text/result.h"

namespace ldscope::loader {

class LdCache {
 public:
  // Loads path. A missing cache is not an error: ld.so then has an empty cache too. The
  // error names the file and what is wrong with it; entries read before it are kept.
  Status Load(const std::string& path = "/etc/ld.so.cache");
  Status LoadFromMemory(const std::string& data);
  // The path the cache gives for name (x86-64 libc6 entries), or "".
  std::string Lookup(const std::string& name) const;
  size_t size() const { return entries_.size(); }

 private:
  std::unordered_map<std::string, std::string> entries_;
};

}  // namespace ldscope::loader
