// See search.h. The order, in one place:
//   0. a name with '/' is opened as given;
//   1. RPATH of the requester, then of its loaders up to the executable, unless the
//      requester has a RUNPATH;
//   2. LD_LIBRARY_PATH (not in secure mode);
//   3. the requester's own RUNPATH (never its loaders');
//   4. /etc/ld.so.cache, unless the requester is -z nodeflib;
//   5. the default directories, unless -z nodeflib.
// Each directory is tried with the supported glibc-hwcaps subdirectories first.
#include "loader/search.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "text/escape.h"

namespace ldscope::loader {
namespace {

std::string DirName(const std::string& p) {
  const auto slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

std::string ReplaceToken(std::string s, const std::string& token, const std::string& value) {
  for (const std::string& t : {"${" + token + "}", "$" + token}) {
    for (size_t pos; (pos = s.find(t)) != std::string::npos;) s.replace(pos, t.size(), value);
  }
  return s;
}

std::string Expand(const std::string& dir, const Object& owner, const Environment& env) {
  std::string d = ReplaceToken(dir, "ORIGIN", DirName(owner.path));
  d = ReplaceToken(d, "LIB", env.lib);
  return ReplaceToken(d, "PLATFORM", env.platform);
}

// glibc accepts a candidate only if it opens and is an ELF object of the right class
// and machine; anything else is skipped and the search goes on.
bool Loadable(const std::string& path) {
  // Non-blocking and regular files only: a FIFO or device there must not hang us.
  const int fd = open(text::Unescape(path).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st {};
  Elf64_Ehdr eh;
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                  read(fd, &eh, sizeof eh) == sizeof eh &&
                  std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
                  eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_machine == EM_X86_64;
  close(fd);
  return ok;
}

bool TryDirs(const std::vector<std::string>& dirs, const std::string& name, const Environment& env,
             Step step, Result* r) {
  for (const auto& dir : dirs) {
    std::vector<std::string> candidates;
    for (const auto& sub : env.subdirs) candidates.push_back(dir + "/" + sub + "/" + name);
    candidates.push_back(dir + "/" + name);
    for (const auto& c : candidates) {
      r->tried.push_back(c);
      if (Loadable(c)) {
        r->path = c;
        r->step = step;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

const char* StepName(Step s) {
  switch (s) {
    case Step::kAsGiven: return "as given";
    case Step::kRpath: return "RPATH";
    case Step::kLdLibraryPath: return "LD_LIBRARY_PATH";
    case Step::kRunpath: return "RUNPATH";
    case Step::kCache: return "ld.so.cache";
    case Step::kDefault: return "default dirs";
  }
  return "?";
}

std::vector<std::string> SplitPath(const std::string& list, const char* seps) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : list) {
    if (std::strchr(seps, c) != nullptr) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::vector<std::string> SubdirsFromCandidates(const std::vector<std::string>& candidates,
                                               const std::string& name) {
  // The candidates for one name under one directory are dir/<sub>/name ... dir/name:
  // learn the <sub> list from the first directory whose plain candidate is present.
  std::vector<std::string> out;
  for (const auto& plain : candidates) {
    if (plain.size() <= name.size() + 1) continue;
    if (plain.compare(plain.size() - name.size() - 1, name.size() + 1, "/" + name) != 0) continue;
    const std::string dir = plain.substr(0, plain.size() - name.size() - 1);
    std::vector<std::string> subs;
    for (const auto& c : candidates) {
      if (c == plain) break;
      if (c.compare(0, dir.size() + 1, dir + "/") != 0) continue;
      const std::string rest = c.substr(dir.size() + 1);
      if (rest.size() > name.size() + 1 && rest.compare(rest.size() - name.size() - 1, name.size() + 1, "/" + name) == 0)
        subs.push_back(rest.substr(0, rest.size() - name.size() - 1));
    }
    if (!subs.empty()) {
      out = subs;
      break;
    }
  }
  return out;
}

Result Search(const std::string& name, const Object& requester,
              const std::vector<Object>& loaders, const Environment& env) {
  Result r;
  if (name.find('/') != std::string::npos) {
    r.tried.push_back(name);
    if (Loadable(name)) {
      r.path = name;
      r.step = Step::kAsGiven;
    }
    return r;
  }
  if (requester.runpath.empty()) {
    std::vector<std::string> dirs;
    for (const auto& d : SplitPath(requester.rpath)) dirs.push_back(Expand(d, requester, env));
    for (const auto& l : loaders)
      for (const auto& d : SplitPath(l.rpath)) dirs.push_back(Expand(d, l, env));
    if (TryDirs(dirs, name, env, Step::kRpath, &r)) return r;
  }
  if (!env.secure && TryDirs(env.ld_library_path, name, env, Step::kLdLibraryPath, &r)) return r;
  if (!requester.runpath.empty()) {
    std::vector<std::string> dirs;
    for (const auto& d : SplitPath(requester.runpath)) dirs.push_back(Expand(d, requester, env));
    if (TryDirs(dirs, name, env, Step::kRunpath, &r)) return r;
  }
  if (requester.nodeflib) return r;
  if (env.cache != nullptr) {
    const std::string p = env.cache->Lookup(name);
    if (!p.empty()) {
      r.tried.push_back(p);
      if (Loadable(p)) {
        r.path = p;
        r.step = Step::kCache;
        return r;
      }
    }
  }
  TryDirs(env.default_dirs, name, env, Step::kDefault, &r);
  return r;
}

}  // namespace ldscope::loader
