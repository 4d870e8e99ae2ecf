// Missing libraries: a NEEDED name that no directory on the search path holds. At
// start-up ld.so then exits 127 before main (an error: the program never ran); in a
// dlopen only that dlopen fails (often an optional component a package probes for:
// information). Both name the library, who needed it, and every directory tried, with
// the step of the search that put it there.
#include <algorithm>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "render/words.h"

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
// on the list, from the trace's step and the loader model's owner of that candidate.
std::string Why(const v1::Candidate& c, const loader::Result& model) {
  for (const auto& m : model.why)
    if (m.path == c.path() && !m.owner.empty())
      return fmt::format("{} of {}", render::CandidateWord(c), BaseName(m.owner));
  return render::CandidateWord(c);
}

}  // namespace

// One "tried" line per directory (its glibc-hwcaps subdirectories, which depend on the
// CPU, are folded into it).
void AddSearchDetails(Context& ctx, const ProcessIndex& pi, const Obj& requester,
                      const std::string& name, const v1::SearchResult* s, bool dlopen,
                      v1::Finding* f) {
  const loader::Result model = loader::Search(name, pi.AsRequester(requester, ctx.files()),
                                              pi.LoaderChain(requester, ctx.files()), pi.env);
  if (s == nullptr) {
    AddDetail(f, "tried", "(the search was not traced)");
    return;
  }
  std::vector<std::string> paths;
  for (const auto& c : s->tried()) paths.push_back(c.path());
  std::vector<std::string> subdirs = loader::SubdirsFromCandidates(paths, name);
  for (const auto& sub : pi.env.subdirs)
    if (std::find(subdirs.begin(), subdirs.end(), sub) == subdirs.end()) subdirs.push_back(sub);
  for (const auto& c : s->tried()) {
    const std::string dir = c.path().substr(0, c.path().size() - std::min(c.path().size(), name.size() + 1));
    const bool subdir = std::any_of(subdirs.begin(), subdirs.end(), [&](const std::string& sub) {
      return dir.size() > sub.size() && dir.compare(dir.size() - sub.size(), sub.size(), sub) == 0 &&
             dir[dir.size() - sub.size() - 1] == '/';
    });
    if (!subdir) AddDetail(f, "tried", fmt::format("{}/ ({})", NormalPath(dir), Why(c, model)));
  }
  if (pi.env.ld_library_path.empty()) AddDetail(f, "LD_LIBRARY_PATH", "not set");
  // A loader's RUNPATH is not inherited (an RPATH is): the usual surprise.
  for (const auto& l : pi.LoaderChain(requester, ctx.files()))
    if (!l.runpath.empty())
      AddDetail(f, "not searched", fmt::format("{}'s RUNPATH {}: a RUNPATH applies only to its own "
                                               "object's NEEDED entries{}", BaseName(l.path), l.runpath,
                                               dlopen ? " and dlopen calls" : ""));
  const loader::Object r = pi.AsRequester(requester, ctx.files());
  if (!r.nodeflib && !ctx.cache_status().ok())
    AddDetail(f, "ld.so.cache", fmt::format("unknown ({})", ctx.cache_status().error()));
  else if (!r.nodeflib && ctx.cache().Lookup(name).empty())
    AddDetail(f, "ld.so.cache", fmt::format("no entry for {}", name));
}

namespace {

void AddFixes(const Obj& requester, const std::string& name, v1::Finding* f) {
  AddFix(f, "install", fmt::format("install the package that provides {}", name));
  AddFix(f, "set-variable",
         fmt::format("if {} is installed in a directory of its own, add that directory to "
                     "LD_LIBRARY_PATH, or to {}'s RUNPATH (patchelf --add-rpath DIR {})",
                     name, BaseName(requester.path), NormalPath(requester.path)));
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
  auto f = NewFinding(pi, v1::MISSING_LIBRARY, v1::ERROR);
  const v1::Library r = ctx.Describe(pi, *req);
  *f.add_objects() = r;
  f.add_evidence(r.seq());
  const std::string program = BaseName(pi.p->exe());
  f.set_headline(fmt::format("{} cannot start: {}, needed by {}, is not found", program, name,
                             BaseName(req->path)));
  f.set_message(fmt::format(
      "{} could not start: {}'s NEEDED {} was found nowhere on its search path, so the dynamic "
      "loader stopped before main (exit status 127).",
      program, BaseName(req->path), name));
  AddDetail(&f, "needed by", fmt::format("{}, loaded {}", r.path(), r.loaded_by()));
  AddSearchDetails(ctx, pi, *req, name, SearchFor(pi, *req, name), false, &f);
  AddFixes(*req, name, &f);
  *out->add_findings() = std::move(f);
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
        auto f = NewFinding(pi, v1::MISSING_LIBRARY, v1::INFO);
        const v1::Library l = ctx.Describe(pi, o);
        *f.add_objects() = l;
        f.add_evidence(o.open_seq);
        f.set_headline(fmt::format("dlopen of {} failed: its NEEDED {} is not found", BaseName(o.path), n));
        f.set_message(fmt::format(
            "{} could not be loaded: its NEEDED {} was found nowhere on its search path, so the "
            "dlopen {} (loaded {}) failed. Packages often probe for optional components this "
            "way; if the program needs it, install it or put its directory on the search path.",
            BaseName(o.path), n, BaseName(o.path), l.loaded_by()));
        AddDetail(&f, "failed", fmt::format("{}, loaded {}", l.path(), l.loaded_by()));
        AddSearchDetails(ctx, pi, o, n, s, false, &f);
        AddDetail(&f, "note", "packages often probe for optional components this way: if the "
                              "program works without it, nothing needs doing");
        AddFixes(o, n, &f);
        *out->add_findings() = std::move(f);
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
