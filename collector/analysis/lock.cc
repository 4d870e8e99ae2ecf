// See lock.h.
#include "analysis/lock.h"

#include <stdlib.h>

#include <cstring>

#include <map>
#include <regex>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/context.h"
#include "store/lock_file.h"
#include "render/render.h"
#include "text/escape.h"
#include "text/strings.h"

namespace ldscope::analysis {
namespace {

const char kUnknown[] = "unknown";

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// The file name the path's symbolic links end at (libcudart.so.12 ->
// libcudart.so.12.4.127); "" when it is not a link or cannot be resolved.
std::string LinkTargetName(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return "";
  const std::string name = BaseName(real);
  free(real);
  return name == BaseName(path) ? "" : name;
}

std::string VersionOf(Context& ctx, const v1::ProcessTimeline& p, const Obj& o) {
  std::string v = ctx.VersionOf(o.path, o.soname);
  if (v.empty()) {
    // The name the SONAME link points at says more (libz.so.1 -> libz.so.1.3).
    const std::string target = LinkTargetName(o.path);
    const auto so = target.find(".so.");
    if (so != std::string::npos && target != o.soname) v = target.substr(so + 4);
  }
  // The C library's version, as the traced process itself reported it.
  if (v.empty() && o.soname == "libc.so.6" && !p.glibc_version().empty()) v = p.glibc_version();
  return v.empty() ? kUnknown : v;
}

std::string Describe(const v1::LockedFile& f) {
  return fmt::format("{} (version {}, build-id {})", store::Rooted(f.root(), f.file()), f.version(),
                     f.build_id());
}

bool Known(const std::string& v) { return !v.empty() && v != kUnknown; }

// Whether every copy of `from` matches one of `in`: the same root and file, the same
// version and build-id where both sides know them. Through an index of in's copies by
// file: a library of 32,000 copies is not compared copy by copy with each other.
bool Covered(const v1::LockedLibrary& from, const v1::LockedLibrary& in, bool ignore_build_id) {
  // Unknown (or, ignored, any build-id) as "": it matches anything.
  auto version = [](const v1::LockedFile& f) { return Known(f.version()) ? f.version() : std::string(); };
  auto build_id = [&](const v1::LockedFile& f) {
    return !ignore_build_id && Known(f.build_id()) ? f.build_id() : std::string();
  };
  struct Copies {
    std::set<std::pair<std::string, std::string>> both;  // (version, build-id)
    std::set<std::string> versions, build_ids;
  };
  std::unordered_map<std::string, Copies> by_file;  // root \0 file
  for (const auto& g : in.copies()) {
    Copies& c = by_file[g.root() + '\0' + g.file()];
    c.both.insert({version(g), build_id(g)});
    c.versions.insert(version(g));
    c.build_ids.insert(build_id(g));
  }
  for (const auto& f : from.copies()) {
    auto it = by_file.find(f.root() + '\0' + f.file());
    if (it == by_file.end()) return false;
    const Copies& c = it->second;
    const std::string v = version(f), b = build_id(f);
    bool found = false;
    if (v.empty() && b.empty())
      found = true;
    else if (v.empty())
      found = c.build_ids.count(b) != 0 || c.build_ids.count("") != 0;
    else if (b.empty())
      found = c.versions.count(v) != 0 || c.versions.count("") != 0;
    else
      for (const auto& [gv, gb] : {std::pair{v, b}, std::pair{std::string(), b}, std::pair{v, std::string()},
                                   std::pair{std::string(), std::string()}})
        found |= c.both.count({gv, gb}) != 0;
    if (!found) return false;
  }
  return true;
}

void Add(v1::LockCheck* out, v1::LockDifference::Kind kind, const std::string& program,
         const std::string& library, const std::string& locked, const std::string& traced) {
  auto* d = out->add_differences();
  d->set_kind(kind);
  d->set_program(program);
  d->set_library(library);
  d->set_locked(locked);
  d->set_traced(traced);
}

std::string Copies(const v1::LockedLibrary& l) {
  std::vector<std::string> each;
  for (const auto& f : l.copies()) each.push_back(Describe(f));
  return fmt::format("{}", fmt::join(each, "; "));
}

}  // namespace

std::string WithoutHwcaps(const std::string& path, const std::vector<std::string>& subdirs) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  std::string dir = path.substr(0, slash);
  const std::string file = path.substr(slash + 1);
  static const std::regex hwcaps("/glibc-hwcaps/[^/]+$");
  std::smatch m;
  if (std::regex_search(dir, m, hwcaps)) return dir.substr(0, m.position(0)) + "/" + file;
  for (const auto& sub : subdirs)
    if (!sub.empty() && dir.size() > sub.size() + 1 &&
        dir.compare(dir.size() - sub.size(), sub.size(), sub) == 0 &&
        dir[dir.size() - sub.size() - 1] == '/')
      return dir.substr(0, dir.size() - sub.size() - 1) + "/" + file;
  return path;
}

v1::LockedFile RootOf(const std::string& path_in, const std::map<std::string, std::string>& env) {
  const std::string path = NormalPath(path_in);
  v1::LockedFile f;
  auto rooted = [&](const std::string& root, const std::string& file) {
    f.set_root(root);
    f.set_file(file);
    return f;
  };
  // A Python package's files: the same wherever the environment lives.
  for (const char* dir : {"/site-packages/", "/dist-packages/"}) {
    const auto at = path.rfind(dir);
    if (at != std::string::npos) return rooted("site-packages", path.substr(at + std::strlen(dir)));
  }
  // The environment's prefix (the longer one when both hold the file).
  std::string best_root, best_prefix;
  for (const auto& [var, root] : {std::pair<std::string, std::string>{"CONDA_PREFIX", "conda"},
                                  {"VIRTUAL_ENV", "venv"}}) {
    auto it = env.find(var);
    if (it == env.end() || it->second.empty() || it->second.front() != '/') continue;
    std::string prefix = NormalPath(it->second);
    while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
    if (prefix == "/") continue;
    if (StartsWith(path, prefix + "/") && prefix.size() > best_prefix.size()) {
      best_root = root;
      best_prefix = prefix;
    }
  }
  if (!best_root.empty()) return rooted(best_root, path.substr(best_prefix.size() + 1));
  // A CUDA toolkit.
  static const std::regex toolkit("^/usr/local/cuda[^/]*/");
  static const std::regex targets("/targets/[^/]+-linux/lib/");
  std::smatch m;
  if (std::regex_search(path, m, toolkit)) return rooted("cuda", path.substr(m.length(0)));
  if (std::regex_search(path, m, targets)) return rooted("cuda", path.substr(m.position(0) + 1));
  // The system directories: the file relative to the deepest one, so that /lib and
  // /usr/lib (merged /usr), multiarch and lib64 layouts read alike.
  static const std::regex multiarch("^(/usr)?/lib/[a-z0-9_]+-linux-[a-z0-9_]+/");
  if (std::regex_search(path, m, multiarch)) return rooted("system", path.substr(m.length(0)));
  for (const char* dir : {"/usr/lib64/", "/usr/lib/", "/lib64/", "/lib/", "/usr/bin/", "/bin/",
                          "/usr/sbin/", "/sbin/"})
    if (StartsWith(path, dir)) return rooted("system", path.substr(std::strlen(dir)));
  return rooted("/", path);
}

v1::Lock MakeLock(const v1::Timeline& timeline) {
  Context ctx(timeline);
  // program key -> library name -> copies
  std::map<std::string, std::map<std::string, std::vector<v1::LockedFile>>> programs;
  for (const auto& pi : ctx.processes()) {
    const v1::ProcessTimeline& p = *pi.p;
    const std::map<std::string, std::string> env(p.env().begin(), p.env().end());
    std::string key = "unknown";
    if (!p.exe().empty()) {
      const v1::LockedFile exe = RootOf(p.exe(), env);
      key = store::Rooted(exe.root(), exe.file());
    }
    auto& libs = programs[key];
    for (const auto& [id, o] : pi.objects) {
      if (o.load == nullptr || o.rolled_back || o.load->python().by_hook()) continue;
      const auto reason = o.load->reason();
      if (reason == v1::LOAD_EXECUTABLE || reason == v1::LOAD_INTERPRETER || reason == v1::LOAD_VDSO)
        continue;
      if (BaseName(o.path) == "libldscope_audit.so") continue;
      std::string path = o.path;
      if (!path.empty() && path.front() != '/' && !p.cwd().empty()) path = p.cwd() + "/" + path;
      path = NormalPath(path);
      // The file a hwcaps subdirectory specialises: what the lock names on every CPU.
      const std::string plain = WithoutHwcaps(path, pi.env.subdirs);
      v1::LockedFile f = RootOf(plain, env);
      f.set_version(VersionOf(ctx, p, o));
      std::string build_id;
      if (plain == path) {
        build_id = o.build_id;
        if (build_id.empty())
          if (const elf::ElfInfo* e = ctx.files().Get(path)) build_id = text::Hex(e->build_id);
      } else if (const elf::ElfInfo* e = ctx.files().Get(plain)) {
        build_id = text::Hex(e->build_id);
      }
      f.set_build_id(build_id.empty() ? kUnknown : build_id);
      std::string name = o.soname.empty() ? BaseName(path) : o.soname;
      if (o.lmid != 0) name += fmt::format(" (namespace {})", o.lmid);
      libs[name].push_back(f);
    }
  }
  v1::Lock lock;
  lock.set_format(store::kLockFormat);
  for (const auto& [key, libs] : programs) {
    auto* p = lock.add_programs();
    p->set_key(key);
    for (const auto& [name, copies] : libs) {
      auto* l = p->add_libraries();
      l->set_name(name);
      for (const auto& f : copies) *l->add_copies() = f;
    }
  }
  render::EscapeByteFields(&lock, {});  // a lock is text, as its file holds it
  store::CanonicalLock(&lock);
  return lock;
}

v1::LockCheck CheckLock(const v1::Lock& locked, const v1::Lock& traced, bool ignore_build_id) {
  v1::LockCheck out;
  std::map<std::string, const v1::LockedProgram*> lp, tp;
  for (const auto& p : locked.programs()) lp[p.key()] = &p;
  for (const auto& p : traced.programs()) tp[p.key()] = &p;
  std::set<std::string> keys;
  for (const auto& [k, p] : lp) keys.insert(k);
  for (const auto& [k, p] : tp) keys.insert(k);
  for (const auto& key : keys) {
    if (!tp.count(key)) {
      Add(&out, v1::LockDifference::PROGRAM_MISSING, key, "", key, "");
      continue;
    }
    if (!lp.count(key)) {
      Add(&out, v1::LockDifference::PROGRAM_ADDED, key, "", "", key);
      continue;
    }
    std::map<std::string, const v1::LockedLibrary*> ll, tl;
    for (const auto& l : lp[key]->libraries()) ll[l.name()] = &l;
    for (const auto& l : tp[key]->libraries()) tl[l.name()] = &l;
    std::set<std::string> names;
    for (const auto& [n, l] : ll) names.insert(n);
    for (const auto& [n, l] : tl) names.insert(n);
    for (const auto& name : names) {
      auto a = ll.find(name), b = tl.find(name);
      if (b == tl.end()) {
        Add(&out, v1::LockDifference::LIBRARY_REMOVED, key, name, Copies(*a->second), "");
        continue;
      }
      if (a == ll.end()) {
        Add(&out, v1::LockDifference::LIBRARY_ADDED, key, name, "", Copies(*b->second));
        continue;
      }
      const v1::LockedLibrary& x = *a->second;
      const v1::LockedLibrary& y = *b->second;
      if (x.copies_size() == 1 && y.copies_size() == 1) {
        const v1::LockedFile& f = x.copies(0);
        const v1::LockedFile& g = y.copies(0);
        if (f.root() != g.root() || f.file() != g.file())
          Add(&out, v1::LockDifference::FILE_CHANGED, key, name, store::Rooted(f.root(), f.file()),
              store::Rooted(g.root(), g.file()));
        if (Known(f.version()) && Known(g.version()) && f.version() != g.version())
          Add(&out, v1::LockDifference::VERSION_CHANGED, key, name, f.version(), g.version());
        if (!ignore_build_id && Known(f.build_id()) && Known(g.build_id()) && f.build_id() != g.build_id())
          Add(&out, v1::LockDifference::BUILD_ID_CHANGED, key, name, f.build_id(), g.build_id());
        continue;
      }
      // Several copies: every copy on each side must match one on the other.
      auto covered = [&](const v1::LockedLibrary& from, const v1::LockedLibrary& in) {
        return Covered(from, in, ignore_build_id);
      };
      if (!covered(x, y) || !covered(y, x))
        Add(&out, v1::LockDifference::COPIES_CHANGED, key, name, Copies(x), Copies(y));
    }
  }
  return out;
}

}  // namespace ldscope::analysis
