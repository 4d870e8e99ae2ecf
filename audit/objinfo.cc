// See objinfo.h. Every pointer derived from the object is checked with mincore()
// before it is read (the dynamic section aside: ld.so has read it already): an auditor
// that faults takes the traced program down with it.
#include "objinfo.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

#include "sys.h"

namespace ldscope::audit {
namespace {

uintptr_t HexVal(char c) {
  if (c >= '0' && c <= '9') return static_cast<uintptr_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uintptr_t>(c - 'a' + 10);
  return 0;
}

// True when every page of [p, p+len) is mapped (mincore fails with ENOMEM otherwise).
uintptr_t kPage = 4096;  // set from ProcessAux on each call

// Page ranges already found mapped while reading the current object: the ELF header,
// program headers and notes usually share a page, so most checks need no system call.
// Reset for each object (a page is only trusted for as long as that object's hook).
struct MappedCache {
  static constexpr size_t kSlots = 4;
  uintptr_t lo[kSlots] = {};
  uintptr_t hi[kSlots] = {};
  size_t next = 0;
  void Reset() {
    for (size_t i = 0; i < kSlots; ++i) lo[i] = hi[i] = 0;
    next = 0;
  }
  bool Has(uintptr_t start, uintptr_t end) const {
    for (size_t i = 0; i < kSlots; ++i)
      if (start >= lo[i] && end <= hi[i]) return true;
    return false;
  }
  void Add(uintptr_t start, uintptr_t end) {
    lo[next] = start;
    hi[next] = end;
    next = (next + 1) % kSlots;
  }
};
MappedCache g_mapped;

bool Mapped(uintptr_t p, size_t len) {
  if (p == 0 || len == 0 || p + len < p) return false;
  const uintptr_t first = p & ~(kPage - 1);
  const uintptr_t last = (p + len + kPage - 1) & ~(kPage - 1);
  if (last < first || g_mapped.Has(first, last)) return last >= first;
  uintptr_t start = first;
  const uintptr_t end = p + len;
  unsigned char vec[64];
  while (start < end) {
    const uintptr_t chunk_end = start + 64 * kPage < end ? start + 64 * kPage : end;
    if (sys::Mincore(reinterpret_cast<void*>(start), chunk_end - start, vec) != 0) return false;
    start = chunk_end;
    start = (start + kPage - 1) & ~(kPage - 1);
  }
  g_mapped.Add(first, last);
  return true;
}

// Finds the program headers of map, or returns false.
bool FindPhdrs(const struct link_map* map, bool is_main, const ProcessAux& aux,
               const ElfW(Phdr)** phdr, size_t* phnum) {
  if (is_main) {
    if (aux.main_phdr == 0 || !Mapped(aux.main_phdr, aux.main_phnum * sizeof(ElfW(Phdr))))
      return false;
    *phdr = reinterpret_cast<const ElfW(Phdr)*>(aux.main_phdr);
    *phnum = aux.main_phnum;
    return true;
  }
  // A shared object's ELF header normally sits at its load bias; the vDSO's at
  // AT_SYSINFO_EHDR. Accept a header only if its PT_DYNAMIC is map->l_ld.
  const uintptr_t candidates[2] = {map->l_addr, aux.vdso_ehdr};
  for (uintptr_t ehdr_at : candidates) {
    if (!Mapped(ehdr_at, sizeof(ElfW(Ehdr)))) continue;
    const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(ehdr_at);
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum == 0)
      continue;
    const uintptr_t ph = ehdr_at + eh->e_phoff;
    if (!Mapped(ph, eh->e_phnum * sizeof(ElfW(Phdr)))) continue;
    const auto* p = reinterpret_cast<const ElfW(Phdr)*>(ph);
    for (size_t i = 0; i < eh->e_phnum; ++i) {
      if (p[i].p_type == PT_DYNAMIC &&
          map->l_addr + p[i].p_vaddr == reinterpret_cast<uintptr_t>(map->l_ld)) {
        *phdr = p;
        *phnum = eh->e_phnum;
        return true;
      }
    }
  }
  return false;
}

void ReadBuildId(const struct link_map* map, const ElfW(Phdr)* phdr, size_t phnum,
                 ObjectInfo* out) {
  for (size_t i = 0; i < phnum; ++i) {
    if (phdr[i].p_type != PT_NOTE) continue;
    const uintptr_t start = map->l_addr + phdr[i].p_vaddr;
    const size_t size = phdr[i].p_filesz;
    if (size < sizeof(ElfW(Nhdr)) || size > (1u << 20) || !Mapped(start, size)) continue;
    const size_t align = phdr[i].p_align == 8 ? 8 : 4;
    size_t off = 0;
    while (off + sizeof(ElfW(Nhdr)) <= size) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(start + off);
      const size_t name_off = off + sizeof(ElfW(Nhdr));
      const size_t desc_off = name_off + ((nh->n_namesz + align - 1) & ~(align - 1));
      const size_t next = desc_off + ((nh->n_descsz + align - 1) & ~(align - 1));
      if (desc_off > size || nh->n_descsz > size - desc_off) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
          std::memcmp(reinterpret_cast<const char*>(start + name_off), "GNU", 4) == 0 &&
          nh->n_descsz > 0 && nh->n_descsz <= kMaxBuildId) {
        std::memcpy(out->build_id, reinterpret_cast<const void*>(start + desc_off),
                    nh->n_descsz);
        out->build_id_len = nh->n_descsz;
        return;
      }
      if (next <= off) break;
      off = next;
    }
  }
}

}  // namespace

void ReadMappedObject(const struct link_map* map, bool is_main, const ProcessAux& aux,
                      ObjectInfo* out) {
  kPage = aux.page_size;
  g_mapped.Reset();
  // The dynamic section needs no check: ld.so read all of it, up to DT_NULL, before it
  // reported the object (elf_get_dynamic_info, for the executable, the vDSO and every
  // object it maps alike).
  const ElfW(Dyn)* dyn = map->l_ld;
  uintptr_t strtab = 0;
  size_t strsz = 0;
  constexpr size_t kMaxDyn = 4096;
  size_t count = 0;
  while (dyn != nullptr && count < kMaxDyn && dyn[count].d_tag != DT_NULL) {
    if (dyn[count].d_tag == DT_STRTAB) strtab = dyn[count].d_un.d_ptr;
    if (dyn[count].d_tag == DT_STRSZ) strsz = dyn[count].d_un.d_val;
    if (dyn[count].d_tag == DT_FLAGS_1) out->flags_1 = dyn[count].d_un.d_val;
    ++count;
  }
  // ld.so relocates DT_STRTAB in place in a writable dynamic section; a read-only
  // one (the vDSO) keeps the link-time address, which lies below the load bias.
  if (strtab != 0 && strtab < map->l_addr) strtab += map->l_addr;
  // Headers, notes and the string table usually lie together at the start of the
  // first segment: one check for all of them when they are close (else, or when it
  // fails, each is checked on its own below).
  const uintptr_t head = map->l_addr & ~(kPage - 1);
  if (!is_main && head != 0 && strtab > head && strsz != 0 && strtab + strsz > strtab &&
      strtab + strsz - head <= 64 * kPage)
    (void)Mapped(head, strtab + strsz - head);

  const ElfW(Phdr)* phdr = nullptr;
  size_t phnum = 0;
  if (FindPhdrs(map, is_main, aux, &phdr, &phnum)) {
    ReadBuildId(map, phdr, phnum, out);
    for (size_t i = 0; i < phnum; ++i) {
      if (phdr[i].p_type != PT_GNU_RELRO) continue;
      // As ld.so's _dl_protect_relro rounds it.
      const uintptr_t start = (map->l_addr + phdr[i].p_vaddr) & ~(kPage - 1);
      const uintptr_t end = (map->l_addr + phdr[i].p_vaddr + phdr[i].p_memsz) & ~(kPage - 1);
      if (start < end) out->relro_start = start;
    }
  }

  if (strtab == 0 || strsz == 0 || !Mapped(strtab, strsz)) return;
  const auto str = [&](ElfW(Xword) off) -> const char* {
    if (off >= strsz) return nullptr;
    const char* s = reinterpret_cast<const char*>(strtab + off);
    return memchr(s, '\0', strsz - off) != nullptr ? s : nullptr;
  };
  for (size_t i = 0; i < count; ++i) {
    const ElfW(Xword) v = dyn[i].d_un.d_val;
    switch (dyn[i].d_tag) {
      case DT_SONAME: out->soname = str(v); break;
      case DT_RPATH: out->rpath = str(v); break;
      case DT_RUNPATH: out->runpath = str(v); break;
      case DT_NEEDED:
        if (out->n_needed < kMaxNeeded) {
          if (const char* s = str(v)) out->needed[out->n_needed++] = s;
        } else {
          out->needed_truncated = true;
        }
        break;
      default: break;
    }
  }
}

namespace {

// Calls f(lo, hi, perms, path, path_len) for each line of /proc/self/maps
// ("7f12a000-7f12b000 rw-p 00000000 08:01 1234   /usr/lib/libx.so") until f returns
// true. Parsed as it streams by, with no heap: a partial line is carried over.
template <typename F>
void ForEachMapping(F&& f) {
  const long opened = sys::Open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (opened < 0) return;
  const int fd = static_cast<int>(opened);
  char buf[16384];
  size_t have = 0;
  bool stop = false;
  while (!stop) {
    const long r = sys::Read(fd, buf + have, sizeof buf - have);
    if (r <= 0) break;
    have += static_cast<size_t>(r);
    size_t line_start = 0;
    for (size_t i = 0; i < have && !stop; ++i) {
      if (buf[i] != '\n') continue;
      const char* p = buf + line_start;
      const char* end = buf + i;
      uintptr_t lo = 0, hi = 0;
      while (p < end && *p != '-') lo = lo * 16 + HexVal(*p++);
      if (p < end) ++p;
      while (p < end && *p != ' ') hi = hi * 16 + HexVal(*p++);
      const char* perms = p < end ? p + 1 : end;
      const char* path = perms;
      while (path < end && *path != '/') ++path;  // the path is the last field
      stop = f(lo, hi, perms, static_cast<size_t>(end - perms), path,
               static_cast<size_t>(end - path));
      line_start = i + 1;
    }
    if (line_start == 0 && have == sizeof buf) break;  // a line longer than the buffer
    std::memmove(buf, buf + line_start, have - line_start);
    have -= line_start;
  }
  sys::Close(fd);
}

}  // namespace

bool MappedFile(uintptr_t addr, char* out, size_t cap) {
  bool found = false;
  ForEachMapping([&](uintptr_t lo, uintptr_t hi, const char*, size_t, const char* path, size_t len) {
    if (addr < lo || addr >= hi) return false;
    if (len > 0 && len < cap) {
      std::memcpy(out, path, len);
      out[len] = '\0';
      found = true;
    }
    return true;
  });
  return found;
}

uintptr_t MappingStart(const char* path) {
  uintptr_t start = 0;
  const size_t n = std::strlen(path);
  ForEachMapping([&](uintptr_t lo, uintptr_t, const char*, size_t, const char* p, size_t len) {
    if (len == n && std::memcmp(p, path, n) == 0 && (start == 0 || lo < start)) start = lo;
    return false;
  });
  return start;
}

namespace {

// Linux 6.11's PROCMAP_QUERY (linux/fs.h, absent from older headers): asks
// /proc/self/maps about the mapping at one address, without generating its text, which in
// a process with thousands of objects is hundreds of KiB for the kernel to format.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kProcmapVmaWritable = 0x02;

}  // namespace

bool PagesWritableByQuery(const uintptr_t* addrs, bool* writable, size_t n) {
  const long opened = sys::Open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (opened < 0) return false;
  const int fd = static_cast<int>(opened);
  bool ok = true;
  for (size_t k = 0; k < n && ok; ++k) {
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_addr = addrs[k];
    const long r = sys::Ioctl(fd, kProcmapQuery, &q);
    if (r == 0) {
      writable[k] = (q.vma_flags & kProcmapVmaWritable) != 0;
    } else if (r == -ENOENT) {
      writable[k] = false;  // not mapped at all
    } else {
      ok = false;  // ENOTTY, EINVAL: an older kernel
    }
  }
  sys::Close(fd);
  return ok;
}

void PagesWritable(const uintptr_t* addrs, bool* writable, size_t n) {
  if (n == 0 || PagesWritableByQuery(addrs, writable, n)) return;
  PagesWritableByMaps(addrs, writable, n);
}

void PagesWritableByMaps(const uintptr_t* addrs, bool* writable, size_t n) {
  for (size_t k = 0; k < n; ++k) writable[k] = false;
  ForEachMapping([&](uintptr_t lo, uintptr_t hi, const char* perms, size_t perms_len, const char*,
                     size_t) {
    if (perms_len > 1 && perms[1] == 'w')
      for (size_t k = 0; k < n; ++k)
        if (addrs[k] >= lo && addrs[k] < hi) writable[k] = true;
    return false;
  });
}

}  // namespace ldscope::audit
