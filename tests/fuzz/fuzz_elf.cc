// Fuzz target: the ELF reader on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "elf/elf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto info = ldscope::elf::ParseElf(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  info.IgnoreError();  // only: no crash
  return 0;
}
