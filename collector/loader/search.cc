// See search.h. The order, in one place:
//   0. a name with '/' is opened as given;
//   1. RPATH of the requester, then of its loaders up to the executable, unless the
//      requester has a RUNPATH;
//   2. LD_LIBRARY_PATH (ignored in secure mode, where the audit library records
//      nothing to model: events.proto's ProcessStart.secure);
//   3. the requester's own RUNPATH (never its loaders');
//   4. /etc/ld.so.cache; for a requester linked -z nodeflib, only an entry outside the
//      default directories;
//   5. the default directories, unless -z nodeflib.
// Each directory is tried with the supported glibc-hwcaps subdirectories first. A file of
// another ELF class or machine is skipped; a file that is not a loadable object ends the
// search with an error.
#include "loader/search.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

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

// A directory as ld.so opens it: an empty element is the current directory, and a
// relative one is taken in it.
std::string InCwd(const std::string& dir, const Environment& env) {
  const std::string cwd = env.cwd.empty() ? "." : env.cwd;
  if (dir.empty()) return cwd;
  return dir.front() == '/' ? dir : cwd + "/" + dir;
}

std::string Expand(const std::string& dir, const Object& owner, const Environment& env) {
  if (dir.empty()) return InCwd(dir, env);
  // $ORIGIN is the directory of the name the object was opened by, symbolic links left
  // as they are (_dl_new_object in dl-object.c; the executable's comes from
  // /proc/self/exe, which the trace records resolved, as glibc reads it).
  std::string d = ReplaceToken(dir, "ORIGIN", DirName(owner.path));
  d = ReplaceToken(d, "LIB", env.lib);
  return InCwd(ReplaceToken(d, "PLATFORM", env.platform), env);
}

// One candidate: tried, skipped, or where the search ends. True when the search ends
// here: the first match (unless keep_going), or a file that fails the search. A file of
// another ELF class or machine is passed over, and the search goes on (open_verify's
// found_other_class); a file that is not a loadable object fails the whole load.
bool TryOne(const std::string& c, v1::CandidateStep step, const std::string& owner, const Environment& env,
            bool keep_going, Result* r) {
  const Verdict v = Judge(IdentOf(c, env), env.machine);
  if (!r->path.empty()) {
    // After the first match: what the loader never reached.
    if (v == Verdict::kUse) r->later.push_back({c, step, owner});
    return false;
  }
  r->tried.push_back(c);
  r->why.push_back({c, step, owner});
  if (v == Verdict::kOtherClass || v == Verdict::kOtherMachine) r->skipped.push_back(r->why.back());
  if (v == Verdict::kStop) {
    r->stopped = r->why.back();
    return true;
  }
  if (v != Verdict::kUse) return false;
  r->path = c;
  r->step = step;
  return !keep_going;
}

// One directory list of one step; dirs[i] came from owners[i] ("" for the
// environment and system steps). Each directory is tried with every supported
// glibc-hwcaps subdirectory first, best first, then itself (open_path over the
// element's capability strings).
bool TryDirs(const std::vector<std::string>& dirs, const std::vector<std::string>& owners,
             const std::string& name, const Environment& env, v1::CandidateStep step, bool keep_going,
             Result* r) {
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string owner = i < owners.size() ? owners[i] : "";
    for (const auto& sub : env.subdirs)
      if (TryOne(dirs[i] + "/" + sub + "/" + name, step, owner, env, keep_going, r)) return true;
    if (TryOne(dirs[i] + "/" + name, step, owner, env, keep_going, r)) return true;
  }
  return false;
}

// The requester, then its loaders: whose RPATHs apply, in order.
std::vector<const Object*> Chain(const Object& requester, const std::vector<Object>& loaders) {
  std::vector<const Object*> out = {&requester};
  for (const auto& l : loaders) out.push_back(&l);
  return out;
}

// Whether an ld.so.cache entry lies in a default directory, which a -z nodeflib requester
// does not take from the cache (_dl_map_new_object in dl-load.c: a prefix match against
// each system directory with its trailing slash, so subdirectories count too).
bool InDefaultDir(const std::string& p, const Environment& env) {
  return std::any_of(env.default_dirs.begin(), env.default_dirs.end(), [&](const std::string& d) {
    const std::string prefix = !d.empty() && d.back() == '/' ? d : d + "/";
    return p.compare(0, prefix.size(), prefix) == 0;
  });
}

}  // namespace

Verdict Judge(const elf::Ident& id, uint16_t machine) {
  using K = elf::Ident::Kind;
  switch (id.kind) {
    case K::kAbsent:
      return Verdict::kAbsent;
    case K::kUnreadable:
    case K::kShort:
    case K::kNotElf:
      return Verdict::kStop;
    case K::kElf:
      break;
  }
  // open_verify's order: the class (skipped), the byte order (fatal), the machine
  // (skipped), the type (fatal). ldscope traces 64-bit little-endian processes.
  if (id.elf_class != ELFCLASS64) return id.elf_class == ELFCLASS32 ? Verdict::kOtherClass : Verdict::kStop;
  if (id.data != ELFDATA2LSB) return Verdict::kStop;
  if (id.machine != (machine != 0 ? machine : elf::HostMachine())) return Verdict::kOtherMachine;
  if (id.type != ET_DYN && id.type != ET_EXEC) return Verdict::kStop;
  return Verdict::kUse;
}

std::string StopError(const elf::Ident& id) {
  using K = elf::Ident::Kind;
  switch (id.kind) {
    case K::kUnreadable:
      return "cannot read file data";
    case K::kShort:
      return "file too short";
    case K::kNotElf:
      return "invalid ELF header";
    default:
      break;
  }
  if (id.elf_class != ELFCLASS64 && id.elf_class != ELFCLASS32) return "invalid ELF header";
  if (id.data != ELFDATA2LSB) return "ELF file data encoding not little-endian";
  if (id.type != ET_DYN && id.type != ET_EXEC) return "only ET_DYN and ET_EXEC can be loaded";
  return "";
}

const elf::Ident& IdentOf(const std::string& path, const Environment& env) {
  if (env.idents == nullptr) {
    thread_local elf::Ident last;
    last = elf::IdentOf(path);
    return last;
  }
  const auto [it, fresh] = env.idents->try_emplace(path);
  if (fresh) it->second = elf::IdentOf(path);
  return it->second;
}

std::vector<std::string> SplitPath(const std::string& list, const char* seps) {
  std::vector<std::string> out;
  for (auto& p : SplitSearchPath(list, seps))
    if (!p.empty()) out.push_back(std::move(p));
  return out;
}

std::vector<std::string> SplitSearchPath(const std::string& list, const char* seps) {
  std::vector<std::string> out;
  if (list.empty()) return out;
  std::string cur;
  for (char c : list) {
    if (std::strchr(seps, c) != nullptr) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<size_t> EmptyElements(const std::string& list, const char* seps) {
  std::vector<size_t> out;
  const std::vector<std::string> parts = SplitSearchPath(list, seps);
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].empty()) out.push_back(i);
  return out;
}

std::vector<std::string> SubdirsFromCandidates(const std::vector<std::string>& candidates,
                                               const std::string& name) {
  // The candidates for one name under one directory are dir/<sub>/name ... dir/name, so
  // a directory's plain candidate follows a run of candidates under it. The legacy
  // subdirectories nest (tls/x86_64/x86_64 before tls/x86_64), so the longest run is
  // the real one.
  auto under = [&](const std::string& c, const std::string& dir) {
    return c.size() > dir.size() + name.size() + 1 && c.compare(0, dir.size(), dir) == 0;
  };
  size_t best_start = 0, best_end = 0;
  std::string best_dir;
  for (size_t j = 0; j < candidates.size(); ++j) {
    const std::string& c = candidates[j];
    if (c.size() <= name.size() + 1 || c.compare(c.size() - name.size() - 1, name.size() + 1, "/" + name) != 0)
      continue;
    const std::string dir = c.substr(0, c.size() - name.size() - 1) + "/";
    size_t k = j;
    while (k > 0 && under(candidates[k - 1], dir)) --k;
    if (j - k > best_end - best_start) {
      best_start = k;
      best_end = j;
      best_dir = dir;
    }
  }
  std::vector<std::string> subs;
  for (size_t i = best_start; i < best_end; ++i) {
    const std::string& g = candidates[i];
    const std::string sub = g.substr(best_dir.size(), g.size() - best_dir.size() - name.size() - 1);
    if (std::find(subs.begin(), subs.end(), sub) == subs.end()) subs.push_back(sub);
  }
  return subs;
}

Result Search(const std::string& name, const Object& requester,
              const std::vector<Object>& loaders, const Environment& env, bool keep_going) {
  Result r;
  // A name with a '/' is no search: the file is opened as named, a relative name in the
  // working directory, and no directory is tried (_dl_map_new_object's else branch:
  // open_verify on the name).
  if (name.find('/') != std::string::npos) {
    TryOne(InCwd(name, env), v1::STEP_AS_GIVEN, "", env, false, &r);
    return r;
  }
  // A requester with a DT_RUNPATH uses no DT_RPATH at all, its own or its loaders'.
  // Without one: the requester's RPATH, then that of the object that loaded it, and on
  // up to the executable's (l_loader, then the main map once; in every namespace).
  if (requester.runpath.empty()) {
    std::vector<std::string> dirs, owners;
    for (const Object* o : Chain(requester, loaders))
      for (const auto& d : SplitSearchPath(o->rpath, ":")) {
        dirs.push_back(Expand(d, *o, env));
        owners.push_back(o->path);
      }
    if (TryDirs(dirs, owners, name, env, v1::STEP_RPATH, keep_going, &r)) return r;
  }
  // LD_LIBRARY_PATH (__rtld_env_path_list), whoever the requester; a relative element is
  // taken in the working directory, as open() takes it.
  std::vector<std::string> llp;
  for (const auto& d : env.ld_library_path) llp.push_back(InCwd(d, env));
  if (TryDirs(llp, {}, name, env, v1::STEP_LD_LIBRARY_PATH, keep_going, &r)) return r;
  // DT_RUNPATH: the requester's own only, never its loaders' (l_runpath_dirs of the
  // loader alone), and after LD_LIBRARY_PATH.
  if (!requester.runpath.empty()) {
    std::vector<std::string> dirs, owners;
    for (const auto& d : SplitSearchPath(requester.runpath, ":")) {
      dirs.push_back(Expand(d, requester, env));
      owners.push_back(requester.path);
    }
    if (TryDirs(dirs, owners, name, env, v1::STEP_RUNPATH, keep_going, &r)) return r;
  }
  // ld.so.cache: one path for the name. A -z nodeflib requester does not take an entry
  // under a default directory. A cached file that does not open (or is skipped) is not
  // the end: the default directories come next.
  if (env.cache != nullptr) {
    const std::string cached = env.cache->Lookup(name);
    if (!cached.empty() && !(requester.nodeflib && InDefaultDir(cached, env)) &&
        TryOne(cached, v1::STEP_LD_SO_CACHE, "", env, keep_going, &r))
      return r;
  }
  // The default directories (__rtld_search_dirs), unless the requester is -z nodeflib
  // (DF_1_NODEFLIB).
  if (requester.nodeflib) return r;
  TryDirs(env.default_dirs, {}, name, env, v1::STEP_DEFAULT_DIRS, keep_going, &r);
  return r;
}

}  // namespace ldscope::loader
