// See search.h. The order, in one place:
//   0. a name with '/' is opened as given;
//   1. RPATH of the requester, then of its loaders up to the executable, unless the
//      requester has a RUNPATH;
//   2. LD_LIBRARY_PATH (ignored in secure mode, where the audit library records
//      nothing to model: events.proto's ProcessStart.secure);
//   3. the requester's own RUNPATH (never its loaders');
//   4. /etc/ld.so.cache, unless the requester is -z nodeflib;
//   5. the default directories, unless -z nodeflib.
// Each directory is tried with the supported glibc-hwcaps subdirectories first.
#include "loader/search.h"

#include <algorithm>
#include <cstring>

#include "elf/elf_file.h"

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
// and of the process's machine (open_verify in dl-load.c: elf_machine_matches_host);
// anything else is skipped and the search goes on.
bool Loadable(const std::string& path, const Environment& env) {
  const uint16_t machine = env.machine != 0 ? env.machine : elf::HostMachine();
  if (env.machines == nullptr) return elf::MachineOf(path) == machine;
  const auto [it, fresh] = env.machines->try_emplace(path, 0);
  if (fresh) it->second = elf::MachineOf(path);
  return it->second == machine;
}

// One directory list of one step; dirs[i] came from owners[i] ("" for the
// environment and system steps). True when the first match was found here.
bool TryDirs(const std::vector<std::string>& dirs, const std::vector<std::string>& owners,
             const std::string& name, const Environment& env, v1::CandidateStep step, bool keep_going,
             Result* r) {
  for (size_t i = 0; i < dirs.size(); ++i) {
    std::vector<std::string> candidates;
    for (const auto& sub : env.subdirs) candidates.push_back(dirs[i] + "/" + sub + "/" + name);
    candidates.push_back(dirs[i] + "/" + name);
    const std::string owner = i < owners.size() ? owners[i] : "";
    for (const auto& c : candidates) {
      if (!r->path.empty()) {
        if (Loadable(c, env)) r->later.push_back({c, step, owner});
        continue;
      }
      r->tried.push_back(c);
      r->why.push_back({c, step, owner});
      if (!Loadable(c, env)) continue;
      r->path = c;
      r->step = step;
      if (!keep_going) return true;
    }
  }
  return !r->path.empty() && !keep_going;
}

// The requester, then its loaders: whose RPATHs apply, in order.
std::vector<const Object*> Chain(const Object& requester, const std::vector<Object>& loaders) {
  std::vector<const Object*> out = {&requester};
  for (const auto& l : loaders) out.push_back(&l);
  return out;
}

// The ld.so.cache step: its one candidate (if the cache names one).
bool TryCache(const std::string& p, const Environment& env, bool keep_going, Result* r) {
  if (p.empty()) return false;
  if (!r->path.empty()) {
    if (Loadable(p, env)) r->later.push_back({p, v1::STEP_LD_SO_CACHE, ""});
    return false;
  }
  r->tried.push_back(p);
  r->why.push_back({p, v1::STEP_LD_SO_CACHE, ""});
  if (!Loadable(p, env)) return false;
  r->path = p;
  r->step = v1::STEP_LD_SO_CACHE;
  return !keep_going;
}

}  // namespace

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
  if (name.find('/') != std::string::npos) {
    r.tried.push_back(name);
    r.why.push_back({name, v1::STEP_AS_GIVEN, ""});
    if (Loadable(name, env)) {
      r.path = name;
      r.step = v1::STEP_AS_GIVEN;
    }
    return r;
  }
  if (requester.runpath.empty()) {
    std::vector<std::string> dirs, owners;
    for (const Object* o : Chain(requester, loaders))
      for (const auto& d : SplitPath(o->rpath)) {
        dirs.push_back(Expand(d, *o, env));
        owners.push_back(o->path);
      }
    if (TryDirs(dirs, owners, name, env, v1::STEP_RPATH, keep_going, &r)) return r;
  }
  if (TryDirs(env.ld_library_path, {}, name, env, v1::STEP_LD_LIBRARY_PATH, keep_going, &r)) return r;
  if (!requester.runpath.empty()) {
    std::vector<std::string> dirs, owners;
    for (const auto& d : SplitPath(requester.runpath)) {
      dirs.push_back(Expand(d, requester, env));
      owners.push_back(requester.path);
    }
    if (TryDirs(dirs, owners, name, env, v1::STEP_RUNPATH, keep_going, &r)) return r;
  }
  if (requester.nodeflib) return r;
  if (env.cache != nullptr && TryCache(env.cache->Lookup(name), env, keep_going, &r)) return r;
  TryDirs(env.default_dirs, {}, name, env, v1::STEP_DEFAULT_DIRS, keep_going, &r);
  return r;
}

}  // namespace ldscope::loader
