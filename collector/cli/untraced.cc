// Why a command cannot be traced at all: LD_AUDIT acts only in the dynamic loader, and
// only outside secure-execution mode (docs/LOADER.md).
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "text/escape.h"

namespace ldscope::cli {
namespace {

// The file execvp would run for command: as given when it has a slash, else the first
// executable regular file of that name on PATH. "" when none.
std::string Resolve(const std::string& command) {
  if (command.find('/') != std::string::npos) return command;
  const char* env = std::getenv("PATH");
  const std::string path = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end == start ? "." : path.substr(start, end - start);
    const std::string candidate = dir + "/" + command;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

// True when an ELF file has a PT_INTERP program header; false for a static one (or
// static-pie). *elf is false when the file is not ELF at all.
template <typename Ehdr, typename Phdr>
bool HasInterp(int fd, const unsigned char* head, size_t n) {
  if (n < sizeof(Ehdr)) return true;
  Ehdr eh;
  std::memcpy(&eh, head, sizeof eh);
  if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum == 0 || eh.e_phnum > 4096) return true;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Phdr ph;
    if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != sizeof ph) return true;
    if (ph.p_type == PT_INTERP) return true;
  }
  return false;
}

std::string WhyNot(const std::string& file, int depth) {
  struct stat st {};
  if (stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  const std::string name = text::Escape(file);
  if ((st.st_mode & S_ISUID) != 0 && st.st_uid != geteuid())
    return fmt::format(
        "{} is set-user-ID (owner uid {}): glibc runs it in secure-execution "
        "mode, which ignores LD_AUDIT",
        name, st.st_uid);
  if ((st.st_mode & S_ISGID) != 0 && st.st_gid != getegid())
    return fmt::format(
        "{} is set-group-ID (group {}): glibc runs it in secure-execution mode, "
        "which ignores LD_AUDIT",
        name, st.st_gid);
  if (getxattr(file.c_str(), "security.capability", nullptr, 0) > 0 && geteuid() != 0)
    return fmt::format(
        "{} has file capabilities: glibc runs it in secure-execution mode, which "
        "ignores LD_AUDIT",
        name);
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  unsigned char head[256] = {};
  const ssize_t got = pread(fd, head, sizeof head, 0);
  const size_t n = got > 0 ? static_cast<size_t>(got) : 0;
  std::string why;
  if (n > 2 && head[0] == '#' && head[1] == '!' && depth == 0) {
    // A script: its interpreter is what runs (the first word after "#!").
    std::string line(reinterpret_cast<const char*>(head) + 2, n - 2);
    line = line.substr(0, line.find('\n'));
    const size_t b = line.find_first_not_of(" \t");
    if (b != std::string::npos) {
      const std::string interp = line.substr(b, line.find_first_of(" \t", b) - b);
      const std::string inner = WhyNot(interp, depth + 1);
      if (!inner.empty()) why = fmt::format("its interpreter {}", inner);
    }
  } else if (n >= EI_NIDENT && std::memcmp(head, ELFMAG, SELFMAG) == 0) {
    const bool has = head[EI_CLASS] == ELFCLASS64 ? HasInterp<Elf64_Ehdr, Elf64_Phdr>(fd, head, n)
                                                  : HasInterp<Elf32_Ehdr, Elf32_Phdr>(fd, head, n);
    if (!has)
      why = fmt::format(
          "{} is statically linked: without a program interpreter the dynamic "
          "loader, and LD_AUDIT with it, never runs",
          name);
  }
  close(fd);
  return why;
}

}  // namespace

std::string WhyNotTraced(const std::string& command) {
  const std::string file = Resolve(command);
  return file.empty() ? "" : WhyNot(file, 0);
}

}  // namespace ldscope::cli
