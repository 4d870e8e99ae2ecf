// See symtab.h. ELF64 little-endian, as elf_file.cc. Reads the section headers, .symtab
// and its string table with pread (no mapping kept), every offset and size checked.
#include "elf/symtab.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

#include "text/escape.h"

namespace ldscope::elf {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The bytes [off, off + len) of the file, or false when they are not all there.
bool ReadAt(int fd, uint64_t size, uint64_t off, uint64_t len, std::string* out) {
  if (off > size || len > size - off) return false;
  out->resize(len);
  uint64_t done = 0;
  while (done < len) {
    const ssize_t n = pread(fd, out->data() + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<uint64_t>(n);
  }
  return true;
}

// The NUL-terminated name at off of the string table; "" out of range.
std::string NameAt(std::string_view strtab, uint32_t off) {
  if (off >= strtab.size()) return "";
  const size_t end = strtab.find('\0', off);
  const std::string_view raw = strtab.substr(off, (end == std::string_view::npos ? strtab.size() : end) - off);
  return std::string(raw);
}

}  // namespace

Result<SymtabLookup> FindLocalDefinitions(const std::string& path, const std::vector<std::string>& names, dev_t dev,
                                          ino_t ino) {
  const std::string shown = text::Escape(path);  // errors are text
  const Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) return Error{fmt::format("{}: {}", shown, std::strerror(errno))};
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Error{fmt::format("{}: not a regular file", shown)};
  if ((dev != 0 || ino != 0) && (st.st_dev != dev || st.st_ino != ino))
    return Error{fmt::format("{}: not the file that was read before (another device or inode)", shown)};
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string buf;
  Elf64_Ehdr eh;
  if (!ReadAt(fd.get(), size, 0, sizeof eh, &buf)) return Error{fmt::format("{}: too short for ELF", shown)};
  std::memcpy(&eh, buf.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return Error{fmt::format("{}: not a little-endian ELF64 file", shown)};
  SymtabLookup out;
  if (eh.e_shoff == 0 || eh.e_shnum == 0) return out;
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return Error{fmt::format("{}: unexpected section header size", shown)};
  std::string shdrs;
  if (!ReadAt(fd.get(), size, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), &shdrs))
    return Error{fmt::format("{}: section headers outside the file", shown)};
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, shdrs.data() + i * sizeof sh, sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sym = section(i);
    if (sym.sh_type != SHT_SYMTAB) continue;
    if (sym.sh_entsize != sizeof(Elf64_Sym) || sym.sh_link >= eh.e_shnum)
      return Error{fmt::format("{}: malformed .symtab", shown)};
    const Elf64_Shdr str = section(sym.sh_link);
    if (sym.sh_size > kMaxSymtabBytes || str.sh_size > kMaxSymtabBytes)
      return Error{fmt::format("{}: .symtab larger than {} MiB, not read", shown, kMaxSymtabBytes >> 20)};
    std::string syms, strs;
    if (!ReadAt(fd.get(), size, sym.sh_offset, sym.sh_size, &syms) ||
        !ReadAt(fd.get(), size, str.sh_offset, str.sh_size, &strs))
      return Error{fmt::format("{}: .symtab outside the file", shown)};
    out.has_symtab = true;
    const std::unordered_set<std::string> wanted(names.begin(), names.end());
    std::unordered_set<std::string> seen;
    // The STT_FILE entry in force: locals of one source file follow its entry; ld lists
    // the symbols the link made local after an entry without a name.
    std::string file;
    bool in_file = false;
    for (size_t at = 0; at + sizeof(Elf64_Sym) <= syms.size(); at += sizeof(Elf64_Sym)) {
      Elf64_Sym s;
      std::memcpy(&s, syms.data() + at, sizeof s);
      const unsigned type = ELF64_ST_TYPE(s.st_info);
      if (type == STT_FILE) {
        file = NameAt(strs, s.st_name);
        in_file = true;
        continue;
      }
      if (ELF64_ST_BIND(s.st_info) != STB_LOCAL || s.st_shndx == SHN_UNDEF || type == STT_SECTION) continue;
      std::string name = NameAt(strs, s.st_name);
      if (name.empty() || wanted.count(name) == 0 || !seen.insert(name).second) continue;
      LocalDefinition d;
      d.name = std::move(name);
      const unsigned vis = ELF64_ST_VISIBILITY(s.st_other);
      if (vis == STV_HIDDEN || vis == STV_INTERNAL)
        d.kind = LocalKind::kHidden;
      else if (in_file && !file.empty()) {
        d.kind = LocalKind::kFileLocal;
        d.source = file;
      }
      out.found.push_back(std::move(d));
    }
    break;
  }
  return out;
}

}  // namespace ldscope::elf
