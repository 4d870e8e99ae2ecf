// Fuzz target: the lock file reader on arbitrary bytes. What it accepts, the writer
// writes back into a text it reads as the same lock.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "store/lock_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ldscope::v1::Lock lock, again;
  std::string error;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!ldscope::store::ParseLock(text, "fuzz.lock", &lock, &error)) return 0;
  const std::string written = ldscope::store::FormatLock(lock);
  if (!ldscope::store::ParseLock(written, "written.lock", &again, &error)) std::abort();
  if (again.SerializeAsString() != lock.SerializeAsString()) std::abort();
  return 0;
}
