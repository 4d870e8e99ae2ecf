// See elf_file.h. ELF64 little-endian only (x86-64, aarch64): what ldscope traces.
#include "elf/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "text/escape.h"

namespace ldscope::elf {
namespace {

// A bounds-checked view: reads copy out (no unaligned access), and fail when out of
// range instead of touching memory outside the file.
class View {
 public:
  explicit View(std::string_view d) : d_(d) {}
  template <typename T>
  bool Read(uint64_t off, T* out) const {
    if (off > d_.size() || sizeof(T) > d_.size() - off) return false;
    std::memcpy(out, d_.data() + off, sizeof(T));
    return true;
  }
  bool InRange(uint64_t off, uint64_t len) const {
    return off <= d_.size() && len <= d_.size() - off;
  }
  // A NUL-terminated string at off within [lo, hi).
  bool Str(uint64_t lo, uint64_t hi, uint64_t off, std::string* out) const {
    std::string_view raw;
    if (!RawStr(lo, hi, off, &raw)) return false;
    *out = raw;
    return true;
  }
  bool RawStr(uint64_t lo, uint64_t hi, uint64_t off, std::string_view* out) const {
    hi = std::min<uint64_t>(hi, d_.size());
    if (lo > hi || off >= hi - lo) return false;
    const char* s = d_.data() + lo + off;
    const void* nul = std::memchr(s, '\0', hi - lo - off);
    if (nul == nullptr) return false;
    *out = std::string_view(s, static_cast<const char*>(nul) - s);
    return true;
  }
  size_t size() const { return d_.size(); }
  std::string_view data() const { return d_; }

 private:
  std::string_view d_;
};


constexpr size_t kMaxSymbols = 4'000'000;  // far above any real library

template <typename T>
bool ReadAt(std::string_view d, uint64_t off, T* out) {
  if (off > d.size() || sizeof(T) > d.size() - off) return false;
  std::memcpy(out, d.data() + off, sizeof(T));
  return true;
}

uint32_t U32At(std::string_view d, uint64_t i) {
  uint32_t v = 0;
  ReadAt(d, i * 4, &v);
  return v;
}

}  // namespace

class Parser {
 public:
  // keep: what holds data (the mapping, a copy), kept by the ElfInfo for its views.
  Parser(std::string_view data, std::shared_ptr<const void> keep, ElfInfo* out) : v_(data), out_(out) {
    out_->bytes_ = std::move(keep);
  }

  Status Parse() {
    Elf64_Ehdr eh;
    if (!v_.Read(0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
      return Error{"not an ELF file"};
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Error{"32-bit ELF is not supported"};
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Error{"big-endian ELF is not supported"};
    out_->machine = eh.e_machine;
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
      return Error{"no section headers (cannot read symbols)"};
    if (!v_.InRange(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)))
      return Error{"section header table lies outside the file"};
    ReadProgramHeaders(eh);
    sections_.resize(eh.e_shnum);
    for (size_t i = 0; i < eh.e_shnum; ++i)
      v_.Read(eh.e_shoff + i * sizeof(Elf64_Shdr), &sections_[i]);
    ReadDynamic();
    ReadNotes();
    ReadVersions();
    ReadSymbols();
    return Status::Ok();
  }

 private:
  const Elf64_Shdr* Find(uint32_t type) const {
    for (const auto& s : sections_)
      if (s.sh_type == type) return &s;
    return nullptr;
  }
  const Elf64_Shdr* Link(const Elf64_Shdr* s) const {
    return s != nullptr && s->sh_link < sections_.size() ? &sections_[s->sh_link] : nullptr;
  }
  bool StrAt(const Elf64_Shdr* strtab, uint64_t off, std::string* out) const {
    if (strtab == nullptr || strtab->sh_type != SHT_STRTAB) return false;
    return v_.Str(strtab->sh_offset, strtab->sh_offset + strtab->sh_size, off, out);
  }
  // The bytes of section s, or "" when it lies outside the file.
  std::string_view Bytes(const Elf64_Shdr* s) const {
    if (s == nullptr || s->sh_type == SHT_NOBITS || !v_.InRange(s->sh_offset, s->sh_size)) return {};
    return v_.data().substr(s->sh_offset, s->sh_size);
  }

  // PT_TLS and PT_GNU_STACK (a file without program headers has neither).
  void ReadProgramHeaders(const Elf64_Ehdr& eh) {
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum == PN_XNUM) return;
    for (size_t i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      if (!v_.Read(eh.e_phoff + i * sizeof(Elf64_Phdr), &ph)) return;  // past the end
      if (ph.p_type == PT_TLS) {
        out_->tls_size = ph.p_memsz;
        out_->tls_align = ph.p_align == 0 ? 1 : ph.p_align;
        out_->tls_first_byte =
            (ph.p_align & (ph.p_align - 1)) == 0 && ph.p_align != 0 ? ph.p_vaddr & (ph.p_align - 1) : 0;
      } else if (ph.p_type == PT_GNU_STACK) {
        out_->gnu_stack = true;
        out_->stack_flags = ph.p_flags;
      }
    }
  }

  void ReadDynamic() {
    const Elf64_Shdr* dyn = Find(SHT_DYNAMIC);
    if (dyn == nullptr) return;
    const Elf64_Shdr* str = Link(dyn);
    const uint64_t n = dyn->sh_size / sizeof(Elf64_Dyn);
    for (uint64_t i = 0; i < n && i < 100000; ++i) {
      Elf64_Dyn d;
      if (!v_.Read(dyn->sh_offset + i * sizeof(Elf64_Dyn), &d)) return;  // past the end
      if (d.d_tag == DT_NULL) break;
      std::string s;
      switch (d.d_tag) {
        case DT_NEEDED:
          if (StrAt(str, d.d_un.d_val, &s)) out_->needed.push_back(s);
          break;
        case DT_SONAME: StrAt(str, d.d_un.d_val, &out_->soname); break;
        case DT_RPATH: StrAt(str, d.d_un.d_val, &out_->rpath); break;
        case DT_RUNPATH: StrAt(str, d.d_un.d_val, &out_->runpath); break;
        case DT_FLAGS_1: out_->flags_1 = d.d_un.d_val; break;
        case DT_FLAGS:
          out_->dt_flags = d.d_un.d_val;
          break;
        default: break;
      }
    }
  }

  void ReadNotes() {
    for (const auto& s : sections_) {
      if (s.sh_type != SHT_NOTE || !v_.InRange(s.sh_offset, s.sh_size)) continue;
      uint64_t off = 0;
      while (off + sizeof(Elf64_Nhdr) <= s.sh_size) {
        Elf64_Nhdr nh;
        v_.Read(s.sh_offset + off, &nh);
        const uint64_t name_off = off + sizeof nh;
        const uint64_t desc_off = name_off + ((uint64_t{nh.n_namesz} + 3) & ~uint64_t{3});
        const uint64_t next = desc_off + ((uint64_t{nh.n_descsz} + 3) & ~uint64_t{3});
        if (desc_off > s.sh_size || nh.n_descsz > s.sh_size - desc_off) break;
        char name[4] = {};
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            v_.Read(s.sh_offset + name_off, &name) && std::memcmp(name, "GNU", 4) == 0 &&
            nh.n_descsz <= 64) {
          std::string id(nh.n_descsz, '\0');
          for (uint32_t i = 0; i < nh.n_descsz; ++i) v_.Read(s.sh_offset + desc_off + i, &id[i]);
          out_->build_id = id;
          return;
        }
        if (next <= off) break;
        off = next;
      }
    }
  }

  // Version indexes (as in .gnu.version) to names, from verdef and verneed.
  void ReadVersions() {
    if (const Elf64_Shdr* vd = Find(SHT_GNU_verdef)) {
      const Elf64_Shdr* str = Link(vd);
      uint64_t off = vd->sh_offset;
      for (uint64_t i = 0; i < vd->sh_info && i < 65536; ++i) {
        Elf64_Verdef d;
        if (!v_.Read(off, &d)) break;  // past the end of the file
        Elf64_Verdaux a;
        std::string name;
        if (v_.Read(off + d.vd_aux, &a) && StrAt(str, a.vda_name, &name)) {
          SetVersion(d.vd_ndx, name, "");
          if ((d.vd_flags & VER_FLG_BASE) == 0) out_->verdefs.push_back(name);
        }
        if (d.vd_next == 0) break;
        off += d.vd_next;
      }
    }
    if (const Elf64_Shdr* vn = Find(SHT_GNU_verneed)) {
      const Elf64_Shdr* str = Link(vn);
      uint64_t off = vn->sh_offset;
      for (uint64_t i = 0; i < vn->sh_info && i < 65536; ++i) {
        Elf64_Verneed n;
        if (!v_.Read(off, &n)) break;  // past the end of the file
        VersionNeed need;
        StrAt(str, n.vn_file, &need.file);
        uint64_t aoff = off + n.vn_aux;
        for (uint32_t j = 0; j < n.vn_cnt && j < 65536; ++j) {
          Elf64_Vernaux a;
          if (!v_.Read(aoff, &a)) break;
          std::string name;
          if (StrAt(str, a.vna_name, &name)) {
            need.versions.push_back(name);
            SetVersion(a.vna_other, name, need.file);
          }
          if (a.vna_next == 0) break;
          aoff += a.vna_next;
        }
        out_->verneeds.push_back(std::move(need));
        if (n.vn_next == 0) break;
        off += n.vn_next;
      }
    }
  }

  void SetVersion(uint32_t index, const std::string& name, const std::string& file) {
    index &= 0x7fff;
    auto& v = out_->versions_;
    if (v.size() <= index) v.resize(index + 1);
    v[index] = {out_->Keep(name), out_->Keep(file)};
  }

  // Views of the dynamic symbol table, its strings, .gnu.version and the hash table;
  // nothing is read from them here.
  void ReadSymbols() {
    const Elf64_Shdr* sym = Find(SHT_DYNSYM);
    if (sym == nullptr) return;
    const uint64_t n = std::min<uint64_t>(sym->sh_size / sizeof(Elf64_Sym), kMaxSymbols);
    if (!v_.InRange(sym->sh_offset, n * sizeof(Elf64_Sym))) return;  // outside the file
    const Elf64_Shdr* str = Link(sym);
    if (str == nullptr || str->sh_type != SHT_STRTAB) return;  // no names: no symbols
    out_->dynsym_ = v_.data().substr(sym->sh_offset, n * sizeof(Elf64_Sym));
    out_->nsyms_ = n;
    // A string table cut by the end of the file keeps what lies inside it.
    if (str->sh_offset <= v_.size())
      out_->dynstr_ = v_.data().substr(str->sh_offset, std::min<uint64_t>(str->sh_size, v_.size() - str->sh_offset));
    if (const Elf64_Shdr* vs = Find(SHT_GNU_versym))
      if (vs->sh_offset <= v_.size())
        out_->versym_ = v_.data().substr(vs->sh_offset, std::min<uint64_t>(vs->sh_size, n * sizeof(uint16_t)));
    ReadGnuHash(Bytes(Find(SHT_GNU_HASH)));
    if (out_->gnu_nbuckets_ == 0) ReadSysvHash(Bytes(Find(SHT_HASH)));
  }

  // DT_GNU_HASH: nbuckets, symoffset, bloom size (64-bit words, a power of two), bloom
  // shift; then the bloom words, the buckets and one chain value per symbol from
  // symoffset on. A table that does not fit is not used (a scan then stands in).
  void ReadGnuHash(std::string_view h) {
    uint32_t hdr[4];
    if (!ReadAt(h, 0, &hdr)) return;
    const uint64_t nbuckets = hdr[0], symoffset = hdr[1], bloom = hdr[2], shift = hdr[3];
    if (nbuckets == 0 || bloom == 0 || (bloom & (bloom - 1)) != 0 || symoffset > out_->nsyms_) return;
    const uint64_t bloom_off = 16, buckets_off = bloom_off + bloom * 8, chain_off = buckets_off + nbuckets * 4;
    if (chain_off > h.size()) return;
    out_->gnu_bloom_ = h.substr(bloom_off, bloom * 8);
    out_->gnu_buckets_ = h.substr(buckets_off, nbuckets * 4);
    out_->gnu_chain_ = h.substr(chain_off);
    out_->gnu_nbuckets_ = static_cast<uint32_t>(nbuckets);
    out_->gnu_symoffset_ = static_cast<uint32_t>(symoffset);
    out_->gnu_shift_ = static_cast<uint32_t>(shift);
  }

  // DT_HASH: nbucket, nchain, buckets, chains (32-bit words on x86-64 and aarch64).
  void ReadSysvHash(std::string_view h) {
    uint32_t hdr[2];
    if (!ReadAt(h, 0, &hdr) || hdr[0] == 0) return;
    const uint64_t nbucket = hdr[0], nchain = hdr[1];
    if (8 + (nbucket + nchain) * 4 > h.size()) return;
    out_->sysv_buckets_ = h.substr(8, nbucket * 4);
    out_->sysv_chain_ = h.substr(8 + nbucket * 4, nchain * 4);
    out_->sysv_nbucket_ = static_cast<uint32_t>(nbucket);
    out_->sysv_nchain_ = static_cast<uint32_t>(nchain);
  }

  View v_;
  ElfInfo* out_;
  std::vector<Elf64_Shdr> sections_;

 public:
  // Maps again only the bytes lookups read (the symbol table, its strings, .gnu.version
  // and the hash table: adjacent in linkers' layouts) and moves e's views there, so
  // that whole (the file, mapped for parsing) can go. Pages of whole that parsing
  // touched, and their neighbours the kernel mapped with them (fault-around, 64 KiB
  // each), then leave the process: ~30 MB for the 315 files of an import torch. False
  // (e unchanged) when that mapping fails.
  static bool KeepOnlySymbols(ElfInfo* e, int fd, std::string_view whole);
};

namespace {

// A read-only mapping of a whole file, unmapped on destruction.
struct Mapping {
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* addr = MAP_FAILED;
  size_t size = 0;
  struct stat st {};
  std::string error;
  int fd = -1;  // kept open with keep_fd, for a Region of the same file
  explicit Mapping(const std::string& path, bool keep_fd = false) {
    // Non-blocking: the path may now be a FIFO, which must not hang us.
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      error = std::strerror(errno);
      return;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error = "not a regular file";
    } else {
      size = static_cast<size_t>(st.st_size);
      if (size > 0) addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (size > 0 && addr == MAP_FAILED) error = std::strerror(errno);
    }
    if (!keep_fd || !error.empty()) {
      close(fd);
      fd = -1;
    }
  }
  ~Mapping() {
    if (addr != MAP_FAILED) munmap(addr, size);
    if (fd >= 0) close(fd);
  }
  std::string_view data() const {
    return addr == MAP_FAILED ? std::string_view() : std::string_view(static_cast<char*>(addr), size);
  }
};

// A read-only mapping of the bytes [off, off + len) of a file.
struct Region {
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  void* addr = MAP_FAILED;
  size_t size = 0;
  uint64_t start = 0;  // the file offset addr maps (off rounded down to a page)
  Region(int fd, uint64_t off, uint64_t len) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    start = off / page * page;
    size = static_cast<size_t>(off + len - start);
    addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
  }
  ~Region() {
    if (addr != MAP_FAILED) munmap(addr, size);
  }
};

}  // namespace

bool Parser::KeepOnlySymbols(ElfInfo* e, int fd, std::string_view whole) {
  std::string_view* views[] = {&e->dynsym_,      &e->dynstr_,    &e->versym_,       &e->gnu_bloom_,
                               &e->gnu_buckets_, &e->gnu_chain_, &e->sysv_buckets_, &e->sysv_chain_};
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const std::string_view* v : views)
    if (!v->empty()) {
      lo = std::min<uint64_t>(lo, v->data() - whole.data());
      hi = std::max<uint64_t>(hi, v->data() - whole.data() + v->size());
    }
  if (lo >= hi) {  // no symbols: nothing to keep
    for (std::string_view* v : views) *v = {};
    e->bytes_.reset();
    return true;
  }
  auto region = std::make_shared<const Region>(fd, lo, hi - lo);
  if (region->addr == MAP_FAILED) return false;
  const char* base = static_cast<const char*>(region->addr) - region->start;
  for (std::string_view* v : views)
    if (!v->empty()) *v = std::string_view(base + (v->data() - whole.data()), v->size());
  e->bytes_ = region;
  return true;
}

uint64_t NameHash(std::string_view name) {
  // FNV-1a, then a finaliser (splitmix64's) so that the low bits mix well for tables.
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

namespace {

uint32_t GnuHash(std::string_view s) {
  uint32_t h = 5381;
  for (unsigned char c : s) h = h * 33 + c;
  return h;
}



uint32_t SysvHash(std::string_view s) {
  uint32_t h = 0;
  for (unsigned char c : s) {
    h = (h << 4) + c;
    const uint32_t g = h & 0xf0000000;
    if (g != 0) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

}  // namespace

SymbolQuery::SymbolQuery(std::string_view name, std::string_view version)
    : name_(name), version_(version), gnu_(GnuHash(name)) {}

SymbolQuery::SymbolQuery(std::string_view name, std::string_view version, uint32_t gnu_hash)
    : name_(name), version_(version), gnu_(gnu_hash) {}

uint32_t SymbolQuery::sysv_hash() const {
  if (!have_sysv_) sysv_ = SysvHash(name_), have_sysv_ = true;
  return sysv_;
}

uint64_t SymbolQuery::name_hash() const {
  if (!have_fnv_) fnv_ = NameHash(name_), have_fnv_ = true;
  return fnv_;
}

std::string_view ElfInfo::Keep(std::string s) {
  if (s.empty()) return {};
  return text_.emplace_back(std::move(s));
}

bool ElfInfo::NameAt(uint32_t off, std::string_view* out) const {
  if (off >= dynstr_.size()) return false;
  const char* s = dynstr_.data() + off;
  const void* nul = std::memchr(s, '\0', dynstr_.size() - off);
  if (nul == nullptr) return false;
  *out = std::string_view(s, static_cast<const char*>(nul) - s);
  return true;
}

bool ElfInfo::RawNameIs(uint32_t off, std::string_view raw) const {
  return off < dynstr_.size() && raw.size() < dynstr_.size() - off &&
         std::memcmp(dynstr_.data() + off, raw.data(), raw.size()) == 0 && dynstr_[off + raw.size()] == '\0';
}

void ElfInfo::VersionOf(size_t i, Symbol* s) const {
  s->hidden = false;
  s->version = s->version_file = {};
  uint16_t vs = 0;
  if (!ReadAt(versym_, i * sizeof(uint16_t), &vs)) return;
  s->hidden = (vs & 0x8000) != 0;
  const uint16_t idx = vs & 0x7fff;
  if (idx >= 2 && idx < versions_.size()) {
    s->version = versions_[idx].first;
    s->version_file = versions_[idx].second;
  }
}

bool ElfInfo::SymbolAt(size_t i, Which w, Symbol* out) const {
  if (from_trace) {
    const Symbol& s = facts_[i];
    if (w != Which::kAll && s.defined != (w == Which::kDefined)) return false;
    *out = s;
    return true;
  }
  if (i == 0) return false;  // the null symbol
  Elf64_Sym s;
  std::memcpy(&s, dynsym_.data() + i * sizeof(Elf64_Sym), sizeof s);
  const bool defined = s.st_shndx != SHN_UNDEF;
  if (w != Which::kAll && defined != (w == Which::kDefined)) return false;
  const unsigned bind = ELF64_ST_BIND(s.st_info), type = ELF64_ST_TYPE(s.st_info);
  if (bind == STB_LOCAL || !NameAt(s.st_name, &out->name) || out->name.empty()) return false;
  out->hash = 0;
  out->defined = defined;
  out->weak = bind == STB_WEAK;
  out->unique = bind == STB_GNU_UNIQUE;
  out->data = type == STT_OBJECT || type == STT_TLS;
  VersionOf(i, out);
  return true;
}

void ElfInfo::NoteUndefined() const {
  undefined_indexed_ = true;
  for (size_t i = 1; i < nsyms_; ++i) {
    Elf64_Sym sym;
    std::memcpy(&sym, dynsym_.data() + i * sizeof(Elf64_Sym), sizeof sym);
    if (sym.st_shndx != SHN_UNDEF || ELF64_ST_BIND(sym.st_info) == STB_LOCAL || sym.st_name >= dynstr_.size())
      continue;
    const char* name = dynstr_.data() + sym.st_name;
    const void* nul = std::memchr(name, '\0', dynstr_.size() - sym.st_name);
    if (nul == nullptr || nul == name || static_cast<const char*>(nul) - name > UINT32_MAX) continue;
    const std::string_view raw(name, static_cast<const char*>(nul) - name);
    undefined_.push_back({static_cast<uint32_t>(i), GnuHash(raw), static_cast<uint32_t>(raw.size())});
  }
}

void ElfInfo::UndefinedAt(const UndefinedRef& r, Symbol* out) const {
  Elf64_Sym sym;
  std::memcpy(&sym, dynsym_.data() + size_t{r.index} * sizeof(Elf64_Sym), sizeof sym);
  out->name = std::string_view(dynstr_.data() + sym.st_name, r.name_size);
  const unsigned bind = ELF64_ST_BIND(sym.st_info), type = ELF64_ST_TYPE(sym.st_info);
  out->hash = 0;
  out->defined = false;
  out->weak = bind == STB_WEAK;
  out->unique = bind == STB_GNU_UNIQUE;
  out->data = type == STT_OBJECT || type == STT_TLS;
  VersionOf(r.index, out);
}

void ElfInfo::Consider(size_t i, const SymbolQuery& q, Lookup* l, size_t* first) const {
  if (i == 0 || i >= nsyms_) return;
  Elf64_Sym s;
  std::memcpy(&s, dynsym_.data() + i * sizeof(Elf64_Sym), sizeof s);
  if (s.st_shndx == SHN_UNDEF || ELF64_ST_BIND(s.st_info) == STB_LOCAL || q.name().empty() ||
      !RawNameIs(s.st_name, q.name()))
    return;
  Symbol d;
  VersionOf(i, &d);
  l->named = true;
  if (!l->matches) {
    const bool versioned = !verdefs.empty();
    l->matches = q.version().empty() ? !d.hidden : (!versioned || d.version == q.version());
  }
  if (i < *first) {
    *first = i;
    const unsigned bind = ELF64_ST_BIND(s.st_info), type = ELF64_ST_TYPE(s.st_info);
    d.name = q.name();
    d.defined = true;
    d.weak = bind == STB_WEAK;
    d.unique = bind == STB_GNU_UNIQUE;
    d.data = type == STT_OBJECT || type == STT_TLS;
    l->first = d;
  }
}

Lookup ElfInfo::Find(const SymbolQuery& q) const {
  Lookup l;
  if (from_trace) {
    const uint64_t h = q.name_hash();
    const bool versioned = !verdefs.empty();
    auto it = std::lower_bound(facts_defs_.begin(), facts_defs_.end(), std::make_pair(h, uint32_t{0}));
    for (; it != facts_defs_.end() && it->first == h; ++it) {
      const Symbol& d = facts_[it->second];
      if (!l.named) l.first = d;
      l.named = true;
      l.matches |= q.version().empty() ? !d.hidden : (!versioned || d.version == q.version());
    }
    return l;
  }
  size_t first = SIZE_MAX;
  if (gnu_nbuckets_ != 0) {
    // ld.so's do_lookup: the bloom filter, then the bucket's chain, whose values are the
    // symbols' hashes with the lowest bit marking the chain's end.
    // (The parser checked that the bloom words and the buckets lie in the file.)
    const uint32_t h = q.gnu_hash();
    const uint64_t nwords = gnu_bloom_.size() / 8;
    uint64_t word;
    std::memcpy(&word, gnu_bloom_.data() + ((h / 64) & (nwords - 1)) * 8, sizeof word);
    // The file's bloom shift may be any value: ld.so shifts its hash, a 64-bit
    // uint_fast32_t on x86-64 and aarch64, by it, and the CPU takes the count modulo 64.
    const uint64_t mask = (uint64_t{1} << (h % 64)) | (uint64_t{1} << ((uint64_t{h} >> (gnu_shift_ % 64)) % 64));
    if ((word & mask) != mask) return l;
    uint32_t i;
    std::memcpy(&i, gnu_buckets_.data() + (h % gnu_nbuckets_) * 4, sizeof i);
    if (i < gnu_symoffset_) return l;
    for (; i < nsyms_; ++i) {
      const uint64_t c = uint64_t{i} - gnu_symoffset_;
      if (c >= gnu_chain_.size() / 4) break;
      const uint32_t v = U32At(gnu_chain_, c);
      if (((v ^ h) >> 1) == 0) Consider(i, q, &l, &first);
      if (v & 1) break;
    }
    return l;
  }
  if (sysv_nbucket_ != 0) {
    uint32_t i = U32At(sysv_buckets_, q.sysv_hash() % sysv_nbucket_);
    for (uint32_t steps = 0; i != 0 && i < sysv_nchain_ && steps < sysv_nchain_; ++steps) {
      Consider(i, q, &l, &first);
      i = U32At(sysv_chain_, i);
    }
    return l;
  }
  for (size_t i = 1; i < nsyms_; ++i) Consider(i, q, &l, &first);
  return l;
}

bool ElfInfo::DefinesVersion(std::string_view version) const {
  return std::find(verdefs.begin(), verdefs.end(), version) != verdefs.end();
}

void ElfInfo::SetTraceSymbols(std::vector<Symbol> symbols) {
  facts_ = std::move(symbols);
  facts_defs_.clear();
  for (size_t i = 0; i < facts_.size(); ++i)
    if (facts_[i].defined) facts_defs_.emplace_back(HashOf(facts_[i]), static_cast<uint32_t>(i));
  std::sort(facts_defs_.begin(), facts_defs_.end());
}

uint16_t HostMachine() {
#if defined(__aarch64__)
  return EM_AARCH64;
#else
  return EM_X86_64;
#endif
}

Result<std::unique_ptr<ElfInfo>> ParseElf(std::string_view data, const std::string& name) {
  auto info = std::make_unique<ElfInfo>();
  info->path = name;
  auto copy = std::make_shared<const std::string>(data);
  Parser p(*copy, copy, info.get());
  if (Status s = p.Parse(); !s.ok()) return Error{fmt::format("{}: {}", text::Escape(name), s.error())};
  return info;
}

Result<std::unique_ptr<ElfInfo>> ReadElf(const std::string& path) {
  auto m = std::make_shared<const Mapping>(path, /*keep_fd=*/true);
  if (!m->error.empty()) return Error{fmt::format("{}: {}", text::Escape(path), m->error)};
  auto info = std::make_unique<ElfInfo>();
  info->path = path;
  Parser p(m->data(), m, info.get());  // the views stay valid while the ElfInfo lives
  if (Status s = p.Parse(); !s.ok()) return Error{fmt::format("{}: {}", text::Escape(path), s.error())};
  info->dev = m->st.st_dev;
  info->ino = m->st.st_ino;
  info->size = static_cast<uint64_t>(m->st.st_size);
  info->mtime_ns = int64_t{m->st.st_mtim.tv_sec} * 1000000000 + m->st.st_mtim.tv_nsec;
  Parser::KeepOnlySymbols(info.get(), m->fd, m->data());  // else the whole file stays mapped
  return info;
}

uint16_t MachineOf(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return 0;
  struct stat st {};
  Elf64_Ehdr eh;
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, &eh, sizeof eh) == sizeof eh &&
                  std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64;
  close(fd);
  return ok ? eh.e_machine : 0;
}

Ident IdentOf(const std::string& path) {
  Ident id;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return id;
  // ld.so reads the header of whatever opened; a FIFO is not read here (it could block
  // a report), and reads as unreadable.
  struct stat st {};
  char buf[4096];
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = read(fd, buf, sizeof buf);
  close(fd);
  if (n < 0) {
    id.kind = Ident::Kind::kUnreadable;
  } else if (n < static_cast<ssize_t>(sizeof(Elf64_Ehdr))) {
    // ld.so (64-bit: the processes ldscope traces) reads a whole header of its own
    // class before it looks at the magic: anything shorter is "file too short".
    id.kind = Ident::Kind::kShort;
    id.head.assign(buf, static_cast<size_t>(n));
  } else if (std::memcmp(buf, ELFMAG, SELFMAG) != 0) {
    id.kind = Ident::Kind::kNotElf;
    id.head.assign(buf, static_cast<size_t>(n));
  } else {
    id.kind = Ident::Kind::kElf;
    id.elf_class = static_cast<uint8_t>(buf[EI_CLASS]);
    id.data = static_cast<uint8_t>(buf[EI_DATA]);
    // e_type and e_machine sit at the same offsets in both classes.
    std::memcpy(&id.type, buf + offsetof(Elf64_Ehdr, e_type), sizeof id.type);
    std::memcpy(&id.machine, buf + offsetof(Elf64_Ehdr, e_machine), sizeof id.machine);
  }
  return id;
}

std::string ClassWord(uint8_t elf_class) {
  switch (elf_class) {
    case ELFCLASS32:
      return "ELFCLASS32";
    case ELFCLASS64:
      return "ELFCLASS64";
    default:
      return fmt::format("ELF class {}", elf_class);
  }
}

std::string MachineWord(uint16_t machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86-64";
    case EM_386:
      return "i386";
    case EM_AARCH64:
      return "AArch64";
    case EM_ARM:
      return "ARM";
    case EM_PPC64:
      return "PowerPC64";
    case EM_S390:
      return "S/390";
    case EM_RISCV:
      return "RISC-V";
    default:
      return fmt::format("machine {}", machine);
  }
}

std::string FindString(const std::string& path, std::string_view needle, size_t max_len) {
  Mapping m(path);
  const std::string_view d = m.data();
  const size_t at = d.find(needle);
  if (at == std::string_view::npos) return "";
  const size_t end = d.find('\0', at);
  return std::string(d.substr(at, std::min(max_len, (end == std::string_view::npos ? d.size() : end) - at)));
}

std::vector<std::string> FindStrings(const std::string& path, std::string_view needle,
                                     size_t max_len, size_t limit) {
  Mapping m(path);
  const std::string_view d = m.data();
  std::vector<std::string> out;
  for (size_t at = d.find(needle); at != std::string_view::npos && out.size() < limit;
       at = d.find(needle, at + 1)) {
    const size_t end = d.find('\0', at);
    out.emplace_back(d.substr(at, std::min(max_len, (end == std::string_view::npos ? d.size() : end) - at)));
  }
  return out;
}

}  // namespace ldscope::elf
