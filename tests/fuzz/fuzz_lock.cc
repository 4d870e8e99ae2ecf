// Fuzz target: the lock file reader on arbitrary bytes. What it accepts, the writer
// writes back into a text it reads as the same lock.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "store/lock_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto lock = ldscope::store::ParseLock(text, "fuzz.lock");
  if (!lock.ok()) return 0;
  const std::string written = ldscope::store::FormatLock(*lock);
  const auto again = ldscope::store::ParseLock(written, "written.lock");
  if (!again.ok()) std::abort();
  if (again->SerializeAsString() != lock->SerializeAsString()) std::abort();
  return 0;
}
