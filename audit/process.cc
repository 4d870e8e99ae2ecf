// See process.h.
#include "process.h"

#include <elf.h>
#include <link.h>

#include <cstring>

#include "sys.h"

namespace ldscope::audit::proc {
namespace {

// All constant-initialised: the initialiser below may run before or after other
// initialisers of the library, and nothing may reset what it wrote.
constexpr size_t kAuxSlots = 64;  // AT_* types in use are below 64
constinit char** g_environ = nullptr;
constinit char** g_argv = nullptr;
constinit int g_argc = 0;
constinit uintptr_t g_aux[kAuxSlots] = {};
using ClockFn = int (*)(clockid_t, timespec*);
constinit ClockFn g_vdso_clock = nullptr;
constinit bool g_loader_done = false;
constinit Loader g_loader{};

// Reads /proc/self/auxv into g_aux: where the auxiliary vector was not found after the
// environment (it always is with glibc's ld.so; this is the safety net).
void ReadAuxvFile() {
  const long fd = sys::Open("/proc/self/auxv", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ElfW(auxv_t) buf[128];
  size_t have = 0;
  while (have < sizeof buf) {
    const long r = sys::Read(static_cast<int>(fd), reinterpret_cast<char*>(buf) + have, sizeof buf - have);
    if (r <= 0) break;
    have += static_cast<size_t>(r);
  }
  sys::Close(static_cast<int>(fd));
  for (size_t i = 0; i < have / sizeof buf[0] && buf[i].a_type != AT_NULL; ++i)
    if (buf[i].a_type < kAuxSlots) g_aux[buf[i].a_type] = buf[i].a_un.a_val;
}

// The auxiliary vector follows the environment's terminating null pointer on the
// initial stack (ld.so keeps that layout also when it runs as a program and moves
// argv). In secure mode ld.so's unsetenv shifts entries down and leaves extra nulls
// before it: they are skipped (an auxv entry's type is never 0 before AT_NULL).
void ReadAuxv(char** envp) {
  bool found = false;
  if (envp != nullptr) {
    char** p = envp;
    while (*p != nullptr) ++p;
    for (size_t guard = 0; *p == nullptr && guard < 4096; ++guard) ++p;
    const auto* av = reinterpret_cast<const ElfW(auxv_t)*>(p);
    bool pagesz = false, phdr = false;
    for (size_t i = 0; i < 256 && av[i].a_type != AT_NULL; ++i) {
      pagesz |= av[i].a_type == AT_PAGESZ;
      phdr |= av[i].a_type == AT_PHDR;
    }
    if (pagesz && phdr) {
      for (size_t i = 0; i < 256 && av[i].a_type != AT_NULL; ++i)
        if (av[i].a_type < kAuxSlots) g_aux[av[i].a_type] = av[i].a_un.a_val;
      found = true;
    }
  }
  if (!found) ReadAuxvFile();
}

// An ELF image mapped in this process (the vDSO, ld.so): its load bias and headers.
struct Image {
  uintptr_t bias = 0;
  const ElfW(Phdr)* phdr = nullptr;
  size_t phnum = 0;
  const ElfW(Dyn)* dyn = nullptr;
};

bool ImageAt(uintptr_t ehdr_addr, Image* out) {
  if (ehdr_addr == 0) return false;
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(ehdr_addr);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr)))
    return false;
  out->phdr = reinterpret_cast<const ElfW(Phdr)*>(ehdr_addr + eh->e_phoff);
  out->phnum = eh->e_phnum;
  bool have_bias = false;
  uintptr_t dyn = 0;
  for (size_t i = 0; i < out->phnum; ++i) {
    const ElfW(Phdr)& ph = out->phdr[i];
    if (ph.p_type == PT_LOAD && !have_bias) {
      out->bias = ehdr_addr + ph.p_offset - ph.p_vaddr;
      have_bias = true;
    }
    if (ph.p_type == PT_DYNAMIC) dyn = ph.p_vaddr;
  }
  if (!have_bias || dyn == 0) return false;
  out->dyn = reinterpret_cast<const ElfW(Dyn)*>(out->bias + dyn);
  return true;
}

uint32_t GnuHash(const char* s) {
  uint32_t h = 5381;
  for (; *s != '\0'; ++s) h = h * 33 + static_cast<unsigned char>(*s);
  return h;
}

uint32_t SysvHash(const char* s) {
  uint32_t h = 0;
  for (; *s != '\0'; ++s) {
    h = (h << 4) + static_cast<unsigned char>(*s);
    const uint32_t g = h & 0xf0000000u;
    if (g != 0) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// The address of the defined symbol `name` in image, through its hash table, or 0.
// `in_place`: the dynamic section's pointers may have been relocated by ld.so (its own
// and ordinary objects'); the vDSO's never are.
uintptr_t FindSymbol(const Image& im, const char* name, bool in_place) {
  uintptr_t symtab = 0, strtab = 0, hash = 0, gnu_hash = 0;
  size_t strsz = 0;
  for (size_t i = 0; i < 4096 && im.dyn[i].d_tag != DT_NULL; ++i) {
    const uintptr_t v = im.dyn[i].d_un.d_ptr;
    switch (im.dyn[i].d_tag) {
      case DT_SYMTAB: symtab = v; break;
      case DT_STRTAB: strtab = v; break;
      case DT_STRSZ: strsz = im.dyn[i].d_un.d_val; break;
      case DT_HASH: hash = v; break;
      case DT_GNU_HASH: gnu_hash = v; break;
      default: break;
    }
  }
  const auto fix = [&](uintptr_t p) { return p != 0 && (!in_place || p < im.bias) ? p + im.bias : p; };
  symtab = fix(symtab);
  strtab = fix(strtab);
  hash = fix(hash);
  gnu_hash = fix(gnu_hash);
  if (symtab == 0 || strtab == 0) return 0;
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(symtab);
  const auto match = [&](uint32_t i) -> uintptr_t {
    const ElfW(Sym)& s = syms[i];
    if (s.st_shndx == SHN_UNDEF || s.st_value == 0 || (strsz != 0 && s.st_name >= strsz)) return 0;
    return std::strcmp(reinterpret_cast<const char*>(strtab + s.st_name), name) == 0 ? im.bias + s.st_value : 0;
  };
  if (gnu_hash != 0) {
    const auto* gh = reinterpret_cast<const uint32_t*>(gnu_hash);
    const uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    if (nbuckets == 0) return 0;
    const auto* buckets = reinterpret_cast<const uint32_t*>(
        reinterpret_cast<const ElfW(Addr)*>(gh + 4) + bloom_size);
    const uint32_t* chain = buckets + nbuckets;
    const uint32_t h = GnuHash(name);
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset) return 0;
    for (size_t guard = 0; guard < 65536; ++guard, ++i) {
      const uint32_t h2 = chain[i - symoffset];
      if ((h | 1) == (h2 | 1))
        if (const uintptr_t a = match(i)) return a;
      if ((h2 & 1) != 0) break;
    }
    return 0;
  }
  if (hash != 0) {
    const auto* hh = reinterpret_cast<const uint32_t*>(hash);
    const uint32_t nbucket = hh[0], nchain = hh[1];
    if (nbucket == 0) return 0;
    const uint32_t* bucket = hh + 2;
    const uint32_t* chain = bucket + nbucket;
    uint32_t i = bucket[SysvHash(name) % nbucket];
    for (size_t guard = 0; i != 0 && i < nchain && guard < 65536; ++guard, i = chain[i])
      if (const uintptr_t a = match(i)) return a;
  }
  return 0;
}

void SetUpClock() {
  Image vdso;
  if (!ImageAt(g_aux[AT_SYSINFO_EHDR], &vdso)) return;
#if defined(__x86_64__)
  const char* name = "__vdso_clock_gettime";
#else
  const char* name = "__kernel_clock_gettime";
#endif
  g_vdso_clock = reinterpret_cast<ClockFn>(FindSymbol(vdso, name, /*in_place=*/false));
}

// ld.so's initialiser entry: ld.so calls DT_INIT_ARRAY functions with (argc, argv, envp).
void Init(int argc, char** argv, char** envp) {
  g_argc = argc;
  g_argv = argv;
  g_environ = envp;
  ReadAuxv(envp);
  SetUpClock();
}

__attribute__((section(".init_array"), used)) void (*const g_init_entry)(int, char**, char**) = Init;

uint64_t Load8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The path of ld.so's file: /proc/self/exe when it runs as a program, else the
// program's PT_INTERP.
const char* LoaderPath(const char* exe_path) {
  if (g_aux[AT_BASE] == 0) return exe_path;
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(g_aux[AT_PHDR]);
  const size_t n = g_aux[AT_PHNUM];
  if (ph == nullptr) return nullptr;
  uintptr_t bias = 0;
  bool have_bias = false;
  for (size_t i = 0; i < n; ++i)
    if (ph[i].p_type == PT_PHDR) {
      bias = g_aux[AT_PHDR] - ph[i].p_vaddr;
      have_bias = true;
    }
  if (!have_bias) return nullptr;
  for (size_t i = 0; i < n; ++i)
    if (ph[i].p_type == PT_INTERP) return reinterpret_cast<const char*>(bias + ph[i].p_vaddr);
  return nullptr;
}

// glibc 2.33 and earlier install ld.so as ld-X.Y.so with a link to it from the PT_INTERP
// path: follow the links (a few hops) until a name says the version.
bool VersionFromLinks(const char* path, char* out, size_t cap) {
  if (path == nullptr) return false;
  char cur[4096];
  const size_t n0 = strnlen(path, sizeof cur - 1);
  std::memcpy(cur, path, n0);
  cur[n0] = '\0';
  for (int hop = 0; hop < 8; ++hop) {
    const char* slash = std::strrchr(cur, '/');
    if (internal::VersionFromFileName(slash != nullptr ? slash + 1 : cur, out, cap)) return true;
    char target[4096];
    const long r = sys::Readlink(cur, target, sizeof target - 1);
    if (r <= 0) return false;
    target[r] = '\0';
    if (target[0] == '/') {
      std::memcpy(cur, target, static_cast<size_t>(r) + 1);
    } else {
      const size_t dir = slash != nullptr ? static_cast<size_t>(slash - cur) + 1 : 0;
      if (dir + static_cast<size_t>(r) + 1 > sizeof cur) return false;
      std::memcpy(cur + dir, target, static_cast<size_t>(r) + 1);
    }
  }
  return false;
}

}  // namespace

namespace internal {

bool VersionFromBanner(const char* text, size_t len, char* out, size_t cap) {
  static constexpr char kKey[] = "release version ";
  constexpr size_t k = sizeof kKey - 1;
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  constexpr uint64_t kV = kOnes * static_cast<unsigned char>('v');
  constexpr size_t kAt = 8;  // the 'v' of "version": rarer in .rodata's strings than 'r'
  // Backwards (the banner is near the end of ld.so's .rodata: see FindLoader), eight
  // bytes at a time until one of them is a 'v'.
  size_t i = len;  // [0, i) is left to look at
  while (i > 0) {
    const size_t lo = i >= 8 ? i - 8 : 0;
    if (i - lo == 8) {
      const uint64_t x = Load8(text + lo) ^ kV;
      if (((x - kOnes) & ~x & kHighs) == 0) {
        i = lo;
        continue;
      }
    }
    for (size_t at = i; at-- > lo;) {
      if (text[at] != 'v' || at < kAt || at - kAt + k > len) continue;
      const size_t j = at - kAt;
      if (std::memcmp(text + j, kKey, k) != 0) continue;
      const char* v = text + j + k;
      const size_t room = len - j - k;
      size_t n = 0;
      while (n < room && n + 1 < cap && ((v[n] >= '0' && v[n] <= '9') || v[n] == '.')) ++n;
      while (n > 0 && v[n - 1] == '.') --n;  // the sentence's full stop
      if (n == 0 || v[0] < '0' || v[0] > '9') continue;
      std::memcpy(out, v, n);
      out[n] = '\0';
      return true;
    }
    i = lo;
  }
  return false;
}

bool VersionFromFileName(const char* name, char* out, size_t cap) {
  if (std::strncmp(name, "ld-", 3) != 0) return false;
  const char* v = name + 3;
  size_t n = 0;
  while ((v[n] >= '0' && v[n] <= '9') || v[n] == '.') ++n;
  // "2.31" then ".so" and nothing more
  if (n < 4 || v[0] < '0' || v[0] > '9' || std::strcmp(v + n - 1, ".so") != 0) return false;
  --n;  // the '.' of ".so"
  if (n + 1 > cap) return false;
  std::memcpy(out, v, n);
  out[n] = '\0';
  return true;
}

}  // namespace internal

char** Environ() { return g_environ; }

char** Argv(int* argc) {
  *argc = g_argc;
  return g_argv;
}

const char* Getenv(const char* name) {
  if (g_environ == nullptr || name == nullptr) return nullptr;
  const size_t n = std::strlen(name);
  for (char** e = g_environ; *e != nullptr; ++e)
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return nullptr;
}

uintptr_t Aux(unsigned long type) { return type < kAuxSlots ? g_aux[type] : 0; }

int ClockGettime(clockid_t clock, timespec* ts) {
  if (g_vdso_clock != nullptr) return g_vdso_clock(clock, ts);
  return static_cast<int>(sys::ClockGettimeSyscall(clock, ts));
}

const Loader& FindLoader(uintptr_t base, const char* exe_path) {
  if (g_loader_done) return g_loader;
  g_loader_done = true;
  Image im;
  if (!ImageAt(base, &im)) {
    VersionFromLinks(LoaderPath(exe_path), g_loader.glibc_version, sizeof g_loader.glibc_version);
    return g_loader;
  }
  g_loader.r_debug = reinterpret_cast<const void*>(FindSymbol(im, "_r_debug", /*in_place=*/true));
  // The banner ("ld.so (GNU libc) stable release version 2.36.", glibc 2.33 and later)
  // is a string of .rodata, which the linker puts right before .eh_frame_hdr
  // (PT_GNU_EH_FRAME): a few KiB before it. Looked for from there backwards to the start of
  // its segment (on aarch64 ld.so's text shares that segment), else in every segment ld.so
  // does not write to.
  uintptr_t eh = 0;
  for (size_t i = 0; i < im.phnum; ++i)
    if (im.phdr[i].p_type == PT_GNU_EH_FRAME) eh = im.phdr[i].p_vaddr;
  for (size_t i = 0; i < im.phnum; ++i) {
    const ElfW(Phdr)& ph = im.phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0) continue;
    size_t len = ph.p_filesz;
    if (eh != 0) {
      if (eh < ph.p_vaddr || eh >= ph.p_vaddr + ph.p_filesz) continue;
      len = eh - ph.p_vaddr;
    }
    if (internal::VersionFromBanner(reinterpret_cast<const char*>(im.bias + ph.p_vaddr), len,
                                    g_loader.glibc_version, sizeof g_loader.glibc_version))
      return g_loader;
  }
  VersionFromLinks(LoaderPath(exe_path), g_loader.glibc_version, sizeof g_loader.glibc_version);
  return g_loader;
}

}  // namespace ldscope::audit::proc
