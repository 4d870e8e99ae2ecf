// A running process as a snapshot reads it (snapshot.h): /proc/PID's files, the
// permission checks the kernel makes and how to say which one refused, where r_debug
// is, and the cross-check of the link maps with the mappings.
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "snapshot/internal.h"
#include "snapshot/memory.h"
#include "snapshot/refusal.h"
#include "snapshot/snapshot.h"

namespace ldscope::snapshot {
namespace {

uint64_t Clock(clockid_t c) {
  timespec t{};
  clock_gettime(c, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

// A /proc file's bytes (at most max); false with errno when it cannot be read.
bool ReadProcFile(const std::string& path, std::string* out, size_t max = 1 << 20) {
  out->clear();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      close(fd);
      errno = e;
      return false;
    }
    if (n == 0 || out->size() >= max) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (out->size() > max) out->resize(max);
  return true;
}

std::string Link(const std::string& path) {
  char buf[4096];
  const ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// "Name:\tvalue" of /proc/PID/status.
std::string StatusField(const std::string& status, const std::string& name) {
  const std::string key = "\n" + name + ":";
  size_t at = status.find(key);
  if (at == std::string::npos && status.rfind(name + ":", 0) == 0)
    at = 0;
  else if (at == std::string::npos)
    return "";
  else
    at += 1;
  at += name.size() + 1;
  const size_t end = status.find('\n', at);
  std::string v = status.substr(at, end == std::string::npos ? std::string::npos : end - at);
  v.erase(0, v.find_first_not_of(" \t"));
  return v;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool HaveCapSysPtrace() {
  std::string status;
  if (!ReadProcFile("/proc/self/status", &status)) return false;
  const uint64_t eff = std::strtoull(StatusField(status, "CapEff").c_str(), nullptr, 16);
  return (eff >> 19) & 1;  // CAP_SYS_PTRACE
}

template <typename Id>
std::vector<Id> IdsOf(const std::string& field) {
  std::vector<Id> out;
  for (const auto& v : Split(field, '\t'))
    if (!v.empty()) out.push_back(static_cast<Id>(std::strtoul(v.c_str(), nullptr, 10)));
  return out;
}

pid_t ParentOf(pid_t pid) {
  std::string status;
  if (!ReadProcFile(fmt::format("/proc/{}/status", pid), &status)) return 0;
  return static_cast<pid_t>(std::strtol(StatusField(status, "PPid").c_str(), nullptr, 10));
}

std::string Refused(pid_t pid, const std::string& what, int err) { return Refusal(GatherAccessFacts(pid, what, err)); }

}  // namespace

AccessFacts GatherAccessFacts(pid_t pid, const std::string& what, int err) {
  AccessFacts f;
  f.pid = pid;
  f.what = what;
  f.err = err;
  std::string status;
  if (ReadProcFile(fmt::format("/proc/{}/status", pid), &status)) {
    f.target_uids = IdsOf<uid_t>(StatusField(status, "Uid"));
    f.target_gids = IdsOf<gid_t>(StatusField(status, "Gid"));
  }
  // process_vm_readv is checked with the reader's real ids (PTRACE_MODE_REALCREDS).
  f.uid = getuid();
  f.gid = getgid();
  f.cap_sys_ptrace = HaveCapSysPtrace();
  std::string map;
  const bool initial_ns = ReadProcFile("/proc/self/uid_map", &map) &&
                          map.find_first_not_of(" \t0") != std::string::npos &&
                          map.substr(map.find_first_not_of(" \t0")).rfind("4294967295", 0) == 0;
  const std::string mine = Link("/proc/self/ns/user"), theirs = Link(fmt::format("/proc/{}/ns/user", pid));
  f.outside_user_ns = !initial_ns && !theirs.empty() && theirs != mine;
  // The files under /proc/PID, not the directory (which keeps the process's owner),
  // belong to root when the process is not dumpable.
  struct stat st {};
  f.proc_known = stat(fmt::format("/proc/{}/status", pid).c_str(), &st) == 0;
  f.proc_owner = st.st_uid;
  std::string scope;
  if (ReadProcFile("/proc/sys/kernel/yama/ptrace_scope", &scope)) f.yama_scope = scope.substr(0, scope.find('\n'));
  const pid_t self = getpid();
  pid_t p = pid;
  for (int depth = 0; depth < 4096 && p > 1; ++depth) {
    p = ParentOf(p);
    if (p == self) {
      f.descendant = true;
      break;
    }
  }
  return f;
}

namespace {

Result<Auxv> ReadAuxv(pid_t pid) {
  std::string raw;
  if (!ReadProcFile(fmt::format("/proc/{}/auxv", pid), &raw, 1 << 16)) {
    const int e = errno;
    if (e == ENOENT || e == ESRCH) return Error{fmt::format("pid {}: no such process", pid)};
    return Error{Refused(pid, fmt::format("/proc/{}/auxv", pid), e)};
  }
  if (raw.empty())
    return Error{fmt::format("pid {}: it has no auxiliary vector (a kernel thread, or it has ended)", pid)};
  Auxv a;
  for (size_t at = 0; at + 16 <= raw.size(); at += 16) {
    uint64_t kv[2];
    std::memcpy(kv, raw.data() + at, 16);
    switch (kv[0]) {
      case AT_PHDR:
        a.phdr = kv[1];
        break;
      case AT_PHNUM:
        a.phnum = kv[1];
        break;
      case AT_BASE:
        a.base = kv[1];
        break;
      case AT_SYSINFO_EHDR:
        a.sysinfo_ehdr = kv[1];
        break;
      case AT_ENTRY:
        a.entry = kv[1];
        break;
      default:
        break;
    }
  }
  return a;
}

// The executable's ELF class, from its file (a 32-bit process's memory has another
// layout, which this reader does not take).
bool Is64Bit(pid_t pid) {
  const int fd = open(fmt::format("/proc/{}/exe", pid).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // not known: the memory reads that follow check the rest
  unsigned char id[EI_NIDENT] = {};
  const bool ok = pread(fd, id, sizeof id, 0) == static_cast<ssize_t>(sizeof id);
  close(fd);
  return !ok || id[EI_CLASS] == ELFCLASS64;
}

// The program's dynamic section's DT_DEBUG value (0: none or not set), and whether it has
// a PT_INTERP at all.
Status FindDtDebug(Memory& mem, const std::vector<Mapping>& maps, const Auxv& aux, bool* dynamic, uint64_t* r_debug) {
  *dynamic = false;
  *r_debug = 0;
  if (aux.phdr == 0 || aux.phnum == 0 || aux.phnum > kMaxPhdrs)
    return Error{"its auxiliary vector names no program headers"};
  std::vector<Elf64_Phdr> ph(aux.phnum);
  if (!mem.Read(aux.phdr, ph.data(), ph.size() * sizeof(Elf64_Phdr))) return Error{std::strerror(mem.last_errno())};
  int64_t bias = 0;
  bool have_bias = false, interp = false;
  uint64_t dyn = 0;
  for (const auto& p : ph) {
    if (p.p_type == PT_PHDR) {
      bias = static_cast<int64_t>(aux.phdr - p.p_vaddr);
      have_bias = true;
    }
    interp |= p.p_type == PT_INTERP;
    if (p.p_type == PT_DYNAMIC) dyn = p.p_vaddr;
  }
  if (!have_bias)
    for (const auto& p : ph)
      if (p.p_type == PT_LOAD && p.p_offset == 0) {
        const Mapping* m = MappingAt(maps, aux.phdr);
        if (m != nullptr) bias = static_cast<int64_t>(m->start - m->offset - p.p_vaddr);
        break;
      }
  *dynamic = interp && dyn != 0 && aux.base != 0;
  if (!*dynamic) return Status::Ok();
  const uint64_t at = dyn + static_cast<uint64_t>(bias);
  for (size_t i = 0; i < kMaxDynamic; ++i) {
    Elf64_Dyn d;
    if (!mem.ReadValue(at + i * sizeof d, &d)) break;
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_DEBUG) {
      *r_debug = d.d_un.d_ptr;
      break;
    }
  }
  return Status::Ok();
}

// ld.so's _r_debug, from its dynamic symbol table in memory (it is mapped at AT_BASE).
uint64_t FindRDebugSymbol(Memory& mem, const Auxv& aux) {
  Elf64_Ehdr eh;
  if (aux.base == 0 || !mem.ReadValue(aux.base, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_phnum > kMaxPhdrs)
    return 0;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!mem.Read(aux.base + eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr))) return 0;
  uint64_t dyn = 0;
  for (const auto& p : ph)
    if (p.p_type == PT_DYNAMIC) dyn = aux.base + p.p_vaddr;
  if (dyn == 0) return 0;
  uint64_t symtab = 0, strtab = 0, strsz = 0;
  for (size_t i = 0; i < kMaxDynamic; ++i) {
    Elf64_Dyn d;
    if (!mem.ReadValue(dyn + i * sizeof d, &d) || d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_SYMTAB) symtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
  }
  if (symtab == 0 || strtab == 0) return 0;
  if (symtab < aux.base) symtab += aux.base;
  if (strtab < aux.base) strtab += aux.base;
  // .dynsym precedes .dynstr in ld.so: its symbols end where the strings begin.
  const size_t n = strtab > symtab ? std::min<uint64_t>((strtab - symtab) / sizeof(Elf64_Sym), 8192) : 8192;
  std::vector<Elf64_Sym> syms(n);
  if (n == 0 || !mem.Read(symtab, syms.data(), n * sizeof(Elf64_Sym))) return 0;
  for (const auto& s : syms) {
    if (s.st_name == 0 || s.st_name >= strsz || s.st_shndx == SHN_UNDEF) continue;
    char name[9] = {};
    if (!mem.Read(strtab + s.st_name, name, std::min<uint64_t>(9, strsz - s.st_name))) continue;
    if (std::memcmp(name, "_r_debug", 9) == 0) return aux.base + s.st_value;
  }
  return 0;
}

// glibc's version from ld.so's banner ("... release version 2.36."), else its file name
// (ld-2.31.so).
std::string GlibcVersion(pid_t pid, const std::string& ldso) {
  std::string bytes;
  if (!ldso.empty() && ReadProcFile(fmt::format("/proc/{}/root{}", pid, ldso), &bytes, 8 << 20)) {
    const std::string key = "release version ";
    const size_t at = bytes.rfind(key);
    if (at != std::string::npos) {
      size_t n = 0;
      const size_t v = at + key.size();
      while (v + n < bytes.size() && (std::isdigit(static_cast<unsigned char>(bytes[v + n])) || bytes[v + n] == '.'))
        ++n;
      while (n > 0 && bytes[v + n - 1] == '.') --n;
      if (n > 0) return bytes.substr(v, n);
    }
  }
  const std::string base = ldso.substr(ldso.rfind('/') + 1);
  if (base.rfind("ld-", 0) == 0 && base.size() > 6 && base.compare(base.size() - 3, 3, ".so") == 0)
    return base.substr(3, base.size() - 6);
  return "";
}

// What /proc/PID/maps says that the link maps do not: a file replaced or deleted since
// it was mapped, ELF objects mapped by other means than the loader.
void CrossCheck(pid_t pid, const std::vector<Mapping>& maps, Process* p) {
  std::set<std::pair<uint64_t, uint64_t>> listed;
  size_t deleted = 0;
  for (const auto& o : p->objects) {
    listed.insert({o.dev, o.ino});
    if (o.mapped.size() > 10 && o.mapped.compare(o.mapped.size() - 10, 10, " (deleted)") == 0) {
      ++deleted;
      if (deleted <= 3) p->notes.push_back(fmt::format("{}: deleted since it was mapped", o.path));
    }
  }
  if (deleted > 3) p->notes.push_back(fmt::format("{} more files deleted since they were mapped", deleted - 3));
  std::vector<std::string> unlisted;
  std::set<std::pair<uint64_t, uint64_t>> counted;
  for (const auto& m : maps) {
    if (m.ino == 0 || m.offset != 0 || m.path.empty() || m.path[0] != '/') continue;
    if (listed.count({m.dev, m.ino}) != 0 || !counted.insert({m.dev, m.ino}).second) continue;
    // Only ELF objects: a data file, a font or a locale archive is not the loader's.
    const bool so = m.path.find(".so") != std::string::npos;
    if (!so) continue;
    char magic[4] = {};
    Memory mem(pid);
    if (!mem.Read(m.start, magic, 4) || std::memcmp(magic, ELFMAG, SELFMAG) != 0) continue;
    unlisted.push_back(m.path);
  }
  if (!unlisted.empty())
    p->notes.push_back(
        fmt::format("mapped but in no link map (mapped by other means than the loader, or by an "
                    "auditor's namespace): {}{}",
                    fmt::join(unlisted.begin(), unlisted.begin() + std::min<size_t>(unlisted.size(), 5), ", "),
                    unlisted.size() > 5 ? fmt::format(", and {} more", unlisted.size() - 5) : ""));
}

// Argv, cwd, the environment, the parent, the pid namespace and the start time.
void ReadProcessFacts(pid_t pid, Process* p) {
  std::string status, text;
  (void)ReadProcFile(fmt::format("/proc/{}/status", pid), &status);
  p->ppid = static_cast<pid_t>(std::atoi(StatusField(status, "PPid").c_str()));
  const std::vector<std::string> nspid = Split(StatusField(status, "NSpid"), '\t');
  p->ns_pid = nspid.empty() ? pid : static_cast<pid_t>(std::atoi(nspid.back().c_str()));
  if (p->ns_pid == 0) p->ns_pid = pid;
  if (ReadProcFile(fmt::format("/proc/{}/cmdline", pid), &text)) {
    if (!text.empty() && text.back() == '\0') text.pop_back();
    p->argv = Split(text, '\0');
  }
  if (ReadProcFile(fmt::format("/proc/{}/environ", pid), &text)) {
    if (!text.empty() && text.back() == '\0') text.pop_back();
    p->environ = Split(text, '\0');
  }
  p->cwd = Link(fmt::format("/proc/{}/cwd", pid));
  p->exe = Link(fmt::format("/proc/{}/exe", pid));
  struct stat st {};
  if (stat(fmt::format("/proc/{}/ns/pid", pid).c_str(), &st) == 0) p->pid_namespace = st.st_ino;
  // Field 22 of /proc/PID/stat: the start, in clock ticks after boot (CLOCK_BOOTTIME).
  if (ReadProcFile(fmt::format("/proc/{}/stat", pid), &text)) {
    const size_t close = text.rfind(')');
    if (close != std::string::npos) {
      std::istringstream in(text.substr(close + 2));
      std::string field;
      for (int i = 3; i <= 22 && (in >> field); ++i) {
        if (i != 22) continue;
        const uint64_t ticks = std::strtoull(field.c_str(), nullptr, 10);
        const uint64_t boot_ns = ticks * (1000000000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK)));
        const uint64_t now_boot = Clock(CLOCK_BOOTTIME), now_mono = Clock(CLOCK_MONOTONIC);
        const uint64_t age = now_boot > boot_ns ? now_boot - boot_ns : 0;
        p->start_mono_ns = now_mono > age ? now_mono - age : 0;
      }
    }
  }
}

// The process has ended: /proc/PID is gone, is another process's (the pid was used
// again), or is a zombie's.
bool Ended(pid_t pid, ino_t ino) {
  struct stat now {};
  if (stat(fmt::format("/proc/{}", pid).c_str(), &now) != 0 || now.st_ino != ino) return true;
  std::string stat_text;
  if (!ReadProcFile(fmt::format("/proc/{}/stat", pid), &stat_text)) return true;
  const size_t close = stat_text.rfind(')');
  if (close == std::string::npos || close + 2 >= stat_text.size()) return true;
  const char state = stat_text[close + 2];
  if (state == 'Z' || state == 'X') return true;
  // Field 9, the kernel's flags: PF_EXITING (0x4) is set from the start of the exit, while
  // the memory is already going and before the process is a zombie.
  std::istringstream in(stat_text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 9 && (in >> field); ++i)
    if (i == 9) return (std::strtoull(field.c_str(), nullptr, 10) & 0x4) != 0;
  return false;
}

Result<Process> ReadLive(pid_t pid, const struct stat& st);

}  // namespace

Result<Process> Read(pid_t pid) {
  struct stat st {};
  if (pid <= 0 || stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0)
    return Error{fmt::format("pid {}: no such process", pid)};
  if (Ended(pid, st.st_ino))
    return Error{fmt::format("pid {}: it has ended (its parent has not collected its exit status yet)", pid)};
  Result<Process> p = ReadLive(pid, st);
  // Whatever failed, a process that ended meanwhile is said to have ended; and one read
  // whole must still be the one read when the reading ends.
  if (Ended(pid, st.st_ino)) return Error{fmt::format("pid {}: it ended while it was read", pid)};
  return p;
}

namespace {

Result<Process> ReadLive(pid_t pid, const struct stat& st) {
  const uint64_t t0 = Clock(CLOCK_MONOTONIC);
  Process p;
  p.pid = pid;
  Result<Auxv> aux = ReadAuxv(pid);
  if (!aux.ok()) return Error{aux.error()};
  if (!Is64Bit(pid))
    return Error{fmt::format("pid {}: a 32-bit process, whose link maps this ldscope does not read", pid)};
  std::string maps_error;
  const std::vector<Mapping> maps = ReadMaps(pid, &maps_error);
  if (maps.empty()) return Error{fmt::format("pid {}: {}", pid, maps_error)};
  ReadProcessFacts(pid, &p);
  Memory mem(pid);
  bool dynamic = false;
  uint64_t r_debug = 0;
  if (Status s = FindDtDebug(mem, maps, *aux, &dynamic, &r_debug); !s.ok()) {
    const int e = mem.last_errno();
    if (e == EPERM || e == EACCES) return Error{Refused(pid, "its memory", e)};
    if (e == ESRCH) return Error{fmt::format("pid {}: it ended while it was read", pid)};
    return Error{fmt::format("pid {}: cannot read its program headers: {}", pid, s.error())};
  }
  if (!dynamic) {
    p.statically_linked = true;
    p.read_mono_ns = Clock(CLOCK_MONOTONIC);
    p.read_ns = p.read_mono_ns - t0;
    return p;
  }
  p.found_via = "DT_DEBUG";
  if (r_debug == 0) {
    r_debug = FindRDebugSymbol(mem, *aux);
    p.found_via = "_r_debug";
  }
  if (r_debug == 0)
    return Error{
        fmt::format("pid {}: found neither its executable's DT_DEBUG nor ld.so's _r_debug: its link maps "
                    "cannot be located",
                    pid)};
  if (Status s = ReadLinkMaps(mem, maps, *aux, r_debug, &p); !s.ok()) return Error{s.error()};
  for (auto& o : p.objects) {
    o.path = o.is_main ? p.exe : o.name;
    if (o.is_main && o.path.size() > 10 && o.path.compare(o.path.size() - 10, 10, " (deleted)") == 0)
      o.path.resize(o.path.size() - 10);
  }
  for (const auto& o : p.objects)
    if (o.is_ldso) {
      p.glibc_version = GlibcVersion(pid, o.path);
      break;
    }
  CrossCheck(pid, maps, &p);
  if (p.namespaces > 1)
    p.notes.push_back(
        "namespaces other than 0 are numbered in the order the loader chained them (r_next), which is "
        "their Lmid_t unless a namespace was emptied and its number used again");
  (void)st;
  p.read_ns = Clock(CLOCK_MONOTONIC) - t0;
  return p;
}

}  // namespace

std::vector<pid_t> Tree(pid_t pid) {
  std::vector<pid_t> out = {pid};
  std::set<pid_t> seen = {pid};
  for (size_t i = 0; i < out.size() && out.size() < 65536; ++i) {
    DIR* d = opendir(fmt::format("/proc/{}/task", out[i]).c_str());
    if (d == nullptr) continue;
    while (dirent* t = readdir(d)) {
      if (t->d_name[0] == '.') continue;
      std::string kids;
      if (!ReadProcFile(fmt::format("/proc/{}/task/{}/children", out[i], t->d_name), &kids)) continue;
      std::istringstream in(kids);
      pid_t k = 0;
      while (in >> k)
        if (seen.insert(k).second) out.push_back(k);
    }
    closedir(d);
  }
  return out;
}

std::vector<pid_t> PythonProcesses() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  const uid_t me = geteuid();
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == getpid()) continue;
    struct stat st {};
    if (stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0 || st.st_uid != me) continue;
    const std::string exe = Link(fmt::format("/proc/{}/exe", pid));
    const std::string base = exe.substr(exe.rfind('/') + 1);
    if (base.rfind("python", 0) == 0) out.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ldscope::snapshot
