// Reads what the loader already mapped for an object (dynamic section, build-id) out of
// the traced process's own memory, without faulting on odd layouts (vDSO, non-PIE
// executables, read-only dynamic sections).
#pragma once

#include <link.h>

#include "encode.h"

namespace ldscope::audit {

struct ProcessAux {
  ElfW(Addr) vdso_ehdr = 0;   // AT_SYSINFO_EHDR
  ElfW(Addr) ldso_base = 0;   // AT_BASE
  ElfW(Addr) main_phdr = 0;   // AT_PHDR
  size_t main_phnum = 0;      // AT_PHNUM
  uintptr_t page_size = 4096; // AT_PAGESZ
};

// Fills soname/needed/rpath/runpath/flags_1/build_id from map's dynamic section.
// Pointers in `out` point into the object's mapped string table.
void ReadMappedObject(const struct link_map* map, bool is_main, const ProcessAux& aux,
                      ObjectInfo* out);

// For each of n addresses, whether its page is mapped writable (used once per batch of
// closes, for the objects the batch opened): PagesWritableByQuery where the kernel has
// PROCMAP_QUERY (Linux 6.11), else PagesWritableByMaps.
void PagesWritable(const uintptr_t* addrs, bool* writable, size_t n);
// One PROCMAP_QUERY ioctl per address on /proc/self/maps; false (nothing filled in
// reliably) when the kernel does not know it.
bool PagesWritableByQuery(const uintptr_t* addrs, bool* writable, size_t n);
// One read of /proc/self/maps' text (in a process with thousands of objects, hundreds
// of KiB for the kernel to format).
void PagesWritableByMaps(const uintptr_t* addrs, bool* writable, size_t n);

// The file mapped at addr, from /proc/self/maps, into out (cap bytes); false if none.
// For the executable when ld.so was run as a program (`ld.so ./prog`): then
// /proc/self/exe names ld.so, and the program is only known by its mapping.
bool MappedFile(uintptr_t addr, char* out, size_t cap);
// The lowest address at which the file `path` is mapped, from /proc/self/maps; 0 if none.
// For ld.so when it was run as a program (AT_BASE is 0 then).
uintptr_t MappingStart(const char* path);

}  // namespace ldscope::audit
