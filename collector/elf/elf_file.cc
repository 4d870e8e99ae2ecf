// See elf_file.h. ELF64 little-endian only (x86-64, aarch64): what ldscope traces.
#include "elf/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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
  // A NUL-terminated string at off within [lo, hi), as escaped text (names on disk
  // are compared with names in the model, which are escaped).
  bool Str(uint64_t lo, uint64_t hi, uint64_t off, std::string* out) const {
    std::string_view raw;
    if (!RawStr(lo, hi, off, &raw)) return false;
    *out = text::Escape(raw);
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

 private:
  std::string_view d_;
};

struct Section {
  Elf64_Shdr h;
};

constexpr size_t kMaxSymbols = 4'000'000;  // far above any real library

class Parser {
 public:
  Parser(std::string_view data, ElfInfo* out) : v_(data), out_(out) {}

  Status Parse() {
    Elf64_Ehdr eh;
    if (!v_.Read(0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
      return Error{"not an ELF file"};
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
      out_->is64 = false;
      return Error{"32-bit ELF is not supported"};
    }
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Error{"big-endian ELF is not supported"};
    out_->machine = eh.e_machine;
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
      return Error{"no section headers (cannot read symbols)"};
    if (!v_.InRange(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)))
      return Error{"section header table lies outside the file"};
    sections_.resize(eh.e_shnum);
    for (size_t i = 0; i < eh.e_shnum; ++i)
      v_.Read(eh.e_shoff + i * sizeof(Elf64_Shdr), &sections_[i].h);
    ReadDynamic();
    ReadNotes();
    ReadVersions();
    ReadSymbols();
    return Status::Ok();
  }

 private:
  const Elf64_Shdr* Find(uint32_t type) const {
    for (const auto& s : sections_)
      if (s.h.sh_type == type) return &s.h;
    return nullptr;
  }
  const Elf64_Shdr* Link(const Elf64_Shdr* s) const {
    return s != nullptr && s->sh_link < sections_.size() ? &sections_[s->sh_link].h : nullptr;
  }
  bool StrAt(const Elf64_Shdr* strtab, uint64_t off, std::string* out) const {
    if (strtab == nullptr || strtab->sh_type != SHT_STRTAB) return false;
    return v_.Str(strtab->sh_offset, strtab->sh_offset + strtab->sh_size, off, out);
  }
  // The same, copied into the object's arena (the file is unmapped after parsing).
  bool ArenaStrAt(const Elf64_Shdr* strtab, uint64_t off, std::string_view* out) const {
    if (strtab == nullptr || strtab->sh_type != SHT_STRTAB) return false;
    std::string_view raw;
    if (!v_.RawStr(strtab->sh_offset, strtab->sh_offset + strtab->sh_size, off, &raw)) return false;
    *out = out_->strings->Add(text::PlainAscii(raw) ? raw : std::string_view(text::Escape(raw)));
    return true;
  }
  void Warn(std::string w) { out_->warnings.push_back(std::move(w)); }

  void ReadDynamic() {
    const Elf64_Shdr* dyn = Find(SHT_DYNAMIC);
    if (dyn == nullptr) return;
    const Elf64_Shdr* str = Link(dyn);
    const uint64_t n = dyn->sh_size / sizeof(Elf64_Dyn);
    for (uint64_t i = 0; i < n && i < 100000; ++i) {
      Elf64_Dyn d;
      if (!v_.Read(dyn->sh_offset + i * sizeof(Elf64_Dyn), &d)) {
        Warn("dynamic section runs past the end of the file");
        return;
      }
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
        default: break;
      }
    }
  }

  void ReadNotes() {
    for (const auto& sec : sections_) {
      const auto& s = sec.h;
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
        if (!v_.Read(off, &d)) {
          Warn("version definitions run past the end of the file");
          break;
        }
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
        if (!v_.Read(off, &n)) {
          Warn("version needs run past the end of the file");
          break;
        }
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
    if (index >= 65536) return;
    if (versions_.size() <= index) versions_.resize(index + 1);
    versions_[index] = {out_->strings->Add(name), out_->strings->Add(file)};
  }

  void ReadSymbols() {
    const Elf64_Shdr* sym = Find(SHT_DYNSYM);
    if (sym == nullptr) return;
    const Elf64_Shdr* str = Link(sym);
    const Elf64_Shdr* versym = Find(SHT_GNU_versym);
    const uint64_t n = std::min<uint64_t>(sym->sh_size / sizeof(Elf64_Sym), kMaxSymbols);
    if (!v_.InRange(sym->sh_offset, n * sizeof(Elf64_Sym))) {
      Warn("dynamic symbol table lies outside the file");
      return;
    }
    out_->symbols.reserve(n);
    // The names fit in the string table's size unless escaping lengthens some.
    if (str != nullptr && str->sh_type == SHT_STRTAB && v_.InRange(str->sh_offset, str->sh_size))
      out_->strings->Reserve(str->sh_size);
    for (uint64_t i = 1; i < n; ++i) {  // entry 0 is the null symbol
      Elf64_Sym s;
      v_.Read(sym->sh_offset + i * sizeof(Elf64_Sym), &s);
      const unsigned bind = ELF64_ST_BIND(s.st_info), type = ELF64_ST_TYPE(s.st_info);
      if (bind == STB_LOCAL) continue;
      Symbol out;
      if (!ArenaStrAt(str, s.st_name, &out.name) || out.name.empty()) continue;
      out.hash = NameHash(out.name);
      out.defined = s.st_shndx != SHN_UNDEF;
      out.weak = bind == STB_WEAK;
      out.global = bind == STB_GLOBAL || bind == STB_GNU_UNIQUE;
      out.function = type == STT_FUNC || type == STT_GNU_IFUNC;
      out.unique = bind == STB_GNU_UNIQUE;
      out.data = type == STT_OBJECT || type == STT_TLS;
      uint16_t vs = 0;
      if (versym != nullptr && v_.Read(versym->sh_offset + i * sizeof(uint16_t), &vs)) {
        out.hidden = (vs & 0x8000) != 0;
        const uint16_t idx = vs & 0x7fff;
        if (idx >= 2 && idx < versions_.size()) {
          out.version = versions_[idx].first;
          out.version_file = versions_[idx].second;
        }
      }
      out_->symbols.push_back(std::move(out));
    }
  }

  View v_;
  ElfInfo* out_;
  std::vector<Section> sections_;
  std::vector<std::pair<std::string_view, std::string_view>> versions_;  // index -> (name, file), in the arena
};

// A read-only mapping of a whole file, unmapped on destruction.
struct Mapping {
  void* addr = MAP_FAILED;
  size_t size = 0;
  struct stat st {};
  std::string error;
  explicit Mapping(const std::string& path) {
    // Non-blocking: the path may now be a FIFO, which must not hang us.
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      error = std::strerror(errno);
      return;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error = "not a regular file";
      close(fd);
      return;
    }
    size = static_cast<size_t>(st.st_size);
    if (size > 0) addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (size > 0 && addr == MAP_FAILED) error = std::strerror(errno);
    close(fd);
  }
  ~Mapping() {
    if (addr != MAP_FAILED) munmap(addr, size);
  }
  std::string_view data() const {
    return addr == MAP_FAILED ? std::string_view() : std::string_view(static_cast<char*>(addr), size);
  }
};

}  // namespace

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

void StringArena::Reserve(size_t n) {
  if (n <= cap_ - used_) return;
  cap_ = n;
  chunks_.push_back(std::make_unique_for_overwrite<char[]>(cap_));
  used_ = 0;
}

std::string_view StringArena::Add(std::string_view s) {
  if (s.empty()) return {};
  if (s.size() > cap_ - used_) Reserve(std::max<size_t>(s.size(), 4096));
  char* at = chunks_.back().get() + used_;
  std::memcpy(at, s.data(), s.size());
  used_ += s.size();
  return std::string_view(at, s.size());
}

Result<std::unique_ptr<ElfInfo>> ParseElf(std::string_view data, const std::string& name) {
  auto info = std::make_unique<ElfInfo>();
  info->path = name;
  Parser p(data, info.get());
  if (Status s = p.Parse(); !s.ok()) return Error{fmt::format("{}: {}", name, s.error())};
  return info;
}

Result<std::unique_ptr<ElfInfo>> ReadElf(const std::string& path) {
  Mapping m(text::Unescape(path));
  if (!m.error.empty()) return Error{fmt::format("{}: {}", path, m.error)};
  auto info = ParseElf(m.data(), path);
  if (info.ok()) {
    (*info)->dev = m.st.st_dev;
    (*info)->ino = m.st.st_ino;
    (*info)->size = static_cast<uint64_t>(m.st.st_size);
    (*info)->mtime_ns = int64_t{m.st.st_mtim.tv_sec} * 1000000000 + m.st.st_mtim.tv_nsec;
  }
  return info;
}

std::string FindString(const std::string& path, std::string_view needle, size_t max_len) {
  Mapping m(text::Unescape(path));
  const std::string_view d = m.data();
  const size_t at = d.find(needle);
  if (at == std::string_view::npos) return "";
  const size_t end = d.find('\0', at);
  return text::Escape(d.substr(at, std::min(max_len, (end == std::string_view::npos ? d.size() : end) - at)));
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
