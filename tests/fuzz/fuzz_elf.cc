// Fuzz target: the ELF reader on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "elf/elf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto info = ldscope::elf::ParseElf(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (info.ok()) {
    // Every symbol, and lookups through the (possibly damaged) hash tables.
    size_t n = 0;
    (*info)->ForEachSymbol(ldscope::elf::ElfInfo::Which::kAll, [&](const ldscope::elf::Symbol&) { ++n; });
    (*info)->Find(ldscope::elf::SymbolQuery("main", ""));
    (*info)->Find(ldscope::elf::SymbolQuery("memcpy", "GLIBC_2.14"));
    (void)n;
  }
  return 0;
}
