// Fuzz target: the /etc/ld.so.cache parser on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "loader/ld_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ldscope::loader::LdCache cache;
  cache.LoadFromMemory(std::string(reinterpret_cast<const char*>(data), size)).IgnoreError();  // only: no crash
  (void)cache.Lookup("libc.so.6");
  return 0;
}
