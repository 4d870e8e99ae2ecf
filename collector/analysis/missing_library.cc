// Missing libraries: a NEEDED name that no directory on the search path holds. At
// start-up ld.so then exits 127 before main (an error: the program never ran); in a
// dlopen only that dlopen fails (often an optional component a package probes for:
// information). Both name the library, who needed it, and every directory tried, with
// the step of the search that put it there.
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "analysis/owners.h"
#include "render/words.h"
#include "text/escape.h"

namespace ldscope::analysis {
namespace {

// The search entry of o's request for name (the candidates ld.so tried), if traced.
const v1::SearchResult* SearchFor(const ProcessIndex& pi, const Obj& o, const std::string& name) {
  for (const v1::Entry* e : pi.entries)
    if (e->has_search() && e->search().requester().id() == o.id &&
        e->search().requested_name() == name)
      return &e->search();
  return nullptr;
}

// "RPATH of needs_gone", "LD_LIBRARY_PATH", "default directory": why a directory was
// on the list, from the trace's step and the loader model's owner of that candidate (the
// nth time the path was tried: two RPATHs may name one directory).
std::string Why(const v1::Candidate& c, int nth, const loader::Result& model) {
  for (const auto& m : model.why)
    if (m.path == c.path() && nth-- == 0)
      return m.owner.empty() ? render::CandidateWord(c)
                             : fmt::format("{} of {}", render::CandidateWord(c), BaseName(m.owner));
  return render::CandidateWord(c);
}

// A copy of the chain with one object's path replaced (its $ORIGIN moved).
std::vector<loader::Object> Moved(std::vector<loader::Object> chain, const std::string& from, const std::string& to) {
  for (auto& o : chain)
    if (o.path == from) o.path = to;
  return chain;
}

bool HasOrigin(const std::string& list) {
  return list.find("$ORIGIN") != std::string::npos || list.find("${ORIGIN}") != std::string::npos;
}

}  // namespace

Reach WhyOutOfReach(Context& ctx, const ProcessIndex& pi, const Obj& requester, const std::string& name) {
  Reach out;
  loader::Object r = pi.AsRequester(requester, ctx.files());
  const std::vector<loader::Object> chain = pi.LoaderChain(requester, ctx.files());
  if (r.nodeflib) {
    loader::Object without = r;
    without.nodeflib = false;
    const loader::Result got = loader::Search(name, without, chain, pi.env);
    if (!got.path.empty()) return {Reach::kNodeflib, got.path, "", "", got.step};
  }
  // The objects whose RPATH or RUNPATH this search used, each with $ORIGIN taken from its
  // real directory instead of the directory of the name it was opened by.
  std::vector<const loader::Object*> owners = {&r};
  if (r.runpath.empty())
    for (const auto& l : chain) owners.push_back(&l);
  for (const loader::Object* o : owners) {
    if (!HasOrigin(r.runpath.empty() ? o->rpath : o->runpath) || o->path.empty() || o->path.front() != '/') continue;
    std::error_code ec;
    const std::string real = std::filesystem::canonical(o->path, ec).string();
    if (ec || DirName(real) == DirName(NormalPath(o->path))) continue;
    loader::Object moved = r;
    if (moved.path == o->path) moved.path = real;
    const loader::Result got = loader::Search(name, moved, Moved(chain, o->path, real), pi.env);
    if (!got.path.empty() && (got.step == v1::STEP_RPATH || got.step == v1::STEP_RUNPATH))
      return {Reach::kOriginLink, got.path, o->path, real, got.step};
  }
  return out;
}

// One "tried" line per directory (its glibc-hwcaps subdirectories, which depend on the
// CPU, are folded into it).
void AddSearchDetails(Context& ctx, const ProcessIndex& pi, const Obj& requester, const std::string& name,
                      const v1::SearchResult* s, bool dlopen, FindingBuilder* f) {
  const loader::Result model = loader::Search(name, pi.AsRequester(requester, ctx.files()),
                                              pi.LoaderChain(requester, ctx.files()), pi.env);
  if (s == nullptr) {
    f->Detail("tried", "(the search was not traced)");
    return;
  }
  std::vector<std::string> paths;
  for (const auto& c : s->tried()) paths.push_back(c.path());
  std::vector<std::string> subdirs = loader::SubdirsFromCandidates(paths, name);
  for (const auto& sub : pi.env.subdirs)
    if (std::find(subdirs.begin(), subdirs.end(), sub) == subdirs.end()) subdirs.push_back(sub);
  std::map<std::string, int> seen;
  for (const auto& c : s->tried()) {
    const int nth = seen[c.path()]++;
    const std::string dir = c.path().substr(0, c.path().size() - std::min(c.path().size(), name.size() + 1));
    const bool subdir = std::any_of(subdirs.begin(), subdirs.end(), [&](const std::string& sub) {
      return dir.size() > sub.size() && dir.compare(dir.size() - sub.size(), sub.size(), sub) == 0 &&
             dir[dir.size() - sub.size() - 1] == '/';
    });
    if (!subdir) f->Detail("tried", text::Show("{}/ ({})", NormalPath(dir), Why(c, nth, model)));
  }
  if (pi.env.ld_library_path.empty()) f->Detail("LD_LIBRARY_PATH", "not set");
  // A loader's RUNPATH is not inherited (an RPATH is): the usual surprise.
  for (const auto& l : pi.LoaderChain(requester, ctx.files()))
    if (!l.runpath.empty())
      f->Detail("not searched", text::Show("{}'s RUNPATH {}: a RUNPATH applies only to its own "
                                           "object's NEEDED entries{}",
                                           BaseName(l.path), l.runpath, dlopen ? " and dlopen calls" : ""));
  const loader::Object r = pi.AsRequester(requester, ctx.files());
  if (!r.nodeflib && !ctx.cache_status().ok())
    f->Detail("ld.so.cache", text::Show("unknown ({})", text::Shown::Escaped(ctx.cache_status().error())));
  else if (!r.nodeflib && ctx.cache().Lookup(name).empty())
    f->Detail("ld.so.cache", text::Show("no entry for {}", name));
  const Reach why = WhyOutOfReach(ctx, pi, requester, name);
  if (why.kind == Reach::kNodeflib) {
    std::vector<std::string> dirs;
    for (const auto& d : pi.env.default_dirs) dirs.push_back(d);
    f->Detail("nodefaultlib", text::Show("{} is linked with -z nodefaultlib (DF_1_NODEFLIB): ld.so skipped the "
                                         "default directories ({}) and the ld.so.cache entries in them",
                                         BaseName(requester.path), fmt::join(dirs, ", ")));
    f->Detail("out of reach", text::Show("{} (what {} would find without the flag)", NormalPath(why.found),
                                         render::StepWord(why.step)));
  } else if (why.kind == Reach::kOriginLink) {
    f->Detail("$ORIGIN",
              text::Show("{} was opened as {}, a symbolic link to {}: its $ORIGIN is {} (glibc takes "
                         "the directory of the name it opened, not of the real file)",
                         BaseName(why.owner), NormalPath(why.owner), why.real_owner, DirName(NormalPath(why.owner))));
    f->Detail("beside the real file", text::ShowBytes(NormalPath(why.found)));
  }
}

namespace {

// The fixes for a file the loader's rules put out of reach.
bool AddReachFixes(const Obj& requester, const std::string& name, const Reach& why, FindingBuilder* f) {
  const std::string dir = DirName(NormalPath(why.found));
  if (why.kind == Reach::kNodeflib) {
    f->Fix(v1::FIX_SET_VARIABLE,
           text::Show("LD_LIBRARY_PATH={} (searched whatever the flag; the default directories "
                      "are not)",
                      text::ShellQuote(dir)),
           "LD_LIBRARY_PATH", dir);
    f->Fix(v1::FIX_RELINK, text::Show("or relink {} without -z nodefaultlib, or give it a RUNPATH that holds {}: "
                                      "patchelf --add-rpath {} {}",
                                      BaseName(requester.path), dir, text::ShellQuote(dir),
                                      text::ShellQuote(NormalPath(requester.path))));
    return true;
  }
  if (why.kind == Reach::kOriginLink) {
    const std::string link_dir = DirName(NormalPath(why.owner));
    f->Fix(v1::FIX_ADD_SYMLINK,
           text::Show("put {} beside the link: ln -s {} {}", name, text::ShellQuote(NormalPath(why.found)),
                      text::ShellQuote(link_dir + "/" + name)));
    f->Fix(v1::FIX_SET_VARIABLE, text::Show("or LD_LIBRARY_PATH={}", text::ShellQuote(dir)), "LD_LIBRARY_PATH", dir);
    f->Fix(v1::FIX_LOAD_BY_PATH, text::Show("or have {} found by its real directory ({}) rather than through the link",
                                            BaseName(why.owner), DirName(why.real_owner)));
    return true;
  }
  return false;
}

void AddFixes(Context& ctx, const ProcessIndex& pi, const Obj& requester, const std::string& name, FindingBuilder* f) {
  if (AddReachFixes(requester, name, WhyOutOfReach(ctx, pi, requester, name), f)) return;
  // The requester's package lists what it needs: installing it again, with its
  // dependencies, restores a missing one.
  const v1::Owner* owner = ctx.OwnerOf(requester.path);
  if (const text::Shown again = ReinstallCommand(owner); !again.empty())
    f->Fix(v1::FIX_INSTALL, text::Show("{} comes from the {}: install it again with its dependencies ({}), or "
                                       "install the package that provides {}",
                                       NormalPath(requester.path), OwnerText(owner), again, name));
  else
    f->Fix(v1::FIX_INSTALL, text::Show("install the package that provides {} ({} is {})", name,
                                       NormalPath(requester.path), OwnerText(owner)));
  f->Fix(v1::FIX_SET_VARIABLE,
         text::Show("if {} is installed in a directory of its own, add that directory to "
                    "LD_LIBRARY_PATH, or to {}'s RUNPATH (patchelf --add-rpath DIR {})",
                    name, BaseName(requester.path), text::ShellQuote(NormalPath(requester.path))));
}

// The first NEEDED search of a start-up object that found nothing, when nothing by that
// name was loaded for it afterwards: ld.so stops the program there.
bool StartupFailure(const ProcessIndex& pi, const Obj** requester, std::string* name) {
  if (pi.p->exited()) return false;
  // Up to the first dlopen's load.
  for (size_t i = 0; i < pi.entries.size() && i < pi.before_first_dlopen; ++i) {
    const v1::Entry& e = *pi.entries[i];
    if (!e.has_search() || e.search().has_same_as()) continue;
    auto it = pi.objects.find(e.search().requester().id());
    if (it == pi.objects.end() || it->second.load == nullptr) continue;
    const auto& needed = it->second.load->needed();
    const std::string& n = e.search().requested_name();
    if (std::find(needed.begin(), needed.end(), n) == needed.end()) continue;
    if (BoundFor(pi, it->second, n) != nullptr) continue;
    *requester = &it->second;
    *name = n;
    return true;
  }
  return false;
}

void Startup(Context& ctx, const ProcessIndex& pi, v1::Report* out) {
  const Obj* req = nullptr;
  std::string name;
  if (!StartupFailure(pi, &req, &name)) return;
  const v1::SearchResult* s = SearchFor(pi, *req, name);
  if (s != nullptr && ExplainedBySearchFiles(ctx, pi, *s)) return;  // search_files.cc: found, unusable
  FindingBuilder f(pi, v1::MISSING_LIBRARY, v1::ERROR);
  const v1::Library r = ctx.Describe(pi, *req);
  *f.proto().add_objects() = r;
  f.proto().add_evidence(r.seq());
  const std::string program = BaseName(pi.p->exe());
  const Reach why = WhyOutOfReach(ctx, pi, *req, name);
  f.Headline(text::Show("{} cannot start: {}, needed by {}, is not found{}", program, name, BaseName(req->path),
                        why.kind == Reach::kNodeflib ? ": -z nodefaultlib excludes the default directories"
                        : why.kind == Reach::kOriginLink
                            ? fmt::format(": {}'s $ORIGIN is its link's directory", BaseName(why.owner))
                            : std::string()));
  f.Detail("needed by", text::Show("{}, loaded {}", r.path(), r.loaded_by()));
  f.Detail("owner", text::Show("{}: {}", r.path(), OwnerText(ctx.OwnerOf(req->path))));
  AddSearchDetails(ctx, pi, *req, name, s, false, &f);
  AddFixes(ctx, pi, *req, name, &f);
  std::move(f).AddTo(out);
}

// A dlopen that failed because a library it needs is nowhere.
void FailedDlopens(Context& ctx, const ProcessIndex& pi, v1::Report* out) {
  for (const v1::Entry* entry : pi.entries) {
    const v1::Entry& e = *entry;
    if (!e.has_failed_dlopen()) continue;
    for (const auto& ref : e.failed_dlopen().rolled_back()) {
      auto it = pi.objects.find(ref.id());
      if (it == pi.objects.end() || it->second.load == nullptr) continue;
      const Obj& o = it->second;
      for (const auto& n : o.load->needed()) {
        const v1::SearchResult* s = SearchFor(pi, o, n);
        // Unsearched names of a dlopen that failed elsewhere are not missing.
        if (BoundFor(pi, o, n) != nullptr || s == nullptr || s->has_same_as()) continue;
        if (ExplainedBySearchFiles(ctx, pi, *s)) break;  // search_files.cc: found, unusable
        FindingBuilder f(pi, v1::MISSING_LIBRARY, v1::INFO);
        const v1::Library l = ctx.Describe(pi, o);
        *f.proto().add_objects() = l;
        f.proto().add_evidence(o.open_seq);
        f.Headline(text::Show("dlopen of {} failed: its NEEDED {} is not found", BaseName(o.path), n));
        f.Detail("failed", text::Show("{}, loaded {}", l.path(), l.loaded_by()));
        f.Detail("owner", text::Show("{}: {}", l.path(), OwnerText(ctx.OwnerOf(o.path))));
        AddSearchDetails(ctx, pi, o, n, s, false, &f);
        f.Detail("note",
                 "packages often probe for optional components this way: if the "
                 "program works without it, nothing needs doing");
        AddFixes(ctx, pi, o, n, &f);
        std::move(f).AddTo(out);
        break;  // ld.so stops at the first NEEDED it cannot find
      }
    }
  }
}

}  // namespace

void FindMissingLibraries(Context& ctx, v1::Report* out) {
  for (const auto& pi : ctx.processes()) {
    Startup(ctx, pi, out);
    FailedDlopens(ctx, pi, out);
  }
}

bool StartupFailed(const ProcessIndex& pi) {
  const Obj* req = nullptr;
  std::string name;
  return StartupFailure(pi, &req, &name);
}

}  // namespace ldscope::analysis
