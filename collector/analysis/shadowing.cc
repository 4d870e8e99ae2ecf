// Import-order effects. (1) A NEEDED name that glibc satisfied with an object loaded
// earlier (SONAME match, no search) although the requester's own search path would
// have found a different file: whoever loaded that object first decided what the
// requester got. (2) A search in which LD_LIBRARY_PATH found a copy while the
// requester's RUNPATH holds another one.
#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/env_change.h"
#include "analysis/owners.h"
#include "text/escape.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

// Where the requester's own search (the loader model) finds name.
loader::Result OwnSearch(Context& ctx, const ProcessIndex& pi, const Obj& requester,
                         const std::string& name) {
  return loader::Search(name, pi.AsRequester(requester, ctx.files()),
                        pi.LoaderChain(requester, ctx.files()), pi.env);
}

v1::Library FileOnly(Context& ctx, const std::string& path, const char* step) {
  v1::Library l;
  l.set_path(NormalPath(path));
  if (const elf::ElfInfo* e = ctx.files().Get(path)) l.set_soname(e->soname);
  l.set_version(ctx.VersionOf(path, l.soname()));
  l.set_found_by(step);
  return l;
}

// The symbol versions requester needs from its NEEDED name that got lacks and would
// offers: when a version node is what is missing, every explanation names it.
void VersionDetails(Context& ctx, const Obj& requester, const std::string& name, const std::string& got,
                    const std::string& would, FindingBuilder* f) {
  const elf::ElfInfo* e = ctx.File(requester.path);
  const elf::ElfInfo* g = ctx.files().Get(got);
  const elf::ElfInfo* w = ctx.files().Get(would);
  if (e == nullptr || g == nullptr || w == nullptr) return;
  for (const auto& vn : e->verneeds) {
    if (vn.file != name) continue;
    for (const auto& v : vn.versions)
      if (!g->DefinesVersion(v) && w->DefinesVersion(v))
        f->Detail("version", text::Show("{} needs {} of {}: {} lacks it, {} offers it", BaseName(requester.path), v,
                                        name, NormalPath(got), NormalPath(would)));
  }
}

void ReusedNeeded(Context& ctx, const ProcessIndex& pi, v1::Report* out) {
  for (const auto& [id, o] : pi.objects) {
    if (o.load == nullptr) continue;
    for (const auto& reuse : o.load->reused()) {
      if (!reuse.loaded_earlier()) continue;
      auto used = pi.objects.find(reuse.object().id());
      if (used == pi.objects.end()) continue;
      const loader::Result own = OwnSearch(ctx, pi, o, reuse.name());
      if (own.path.empty() || ctx.SameFile(own.path, used->second.path)) continue;
      // Only a path the requester (or its environment) names says which copy it wants;
      // reusing a preloaded copy instead of the system's (ld.so.cache, default dirs) is
      // how wheels preload their own libraries, not a fault.
      if (own.step == v1::STEP_LD_SO_CACHE || own.step == v1::STEP_DEFAULT_DIRS) continue;
      FindingBuilder f(pi, v1::SHADOWED_DEPENDENCY, o.rolled_back ? v1::ERROR : v1::WARNING);
      const v1::Library shadow = ctx.Describe(pi, used->second);
      const v1::Library req = ctx.Describe(pi, o);
      const v1::Library would = FileOnly(ctx, own.path, render::StepWord(own.step));
      *f.proto().add_objects() = shadow;
      *f.proto().add_objects() = req;
      *f.proto().add_objects() = would;
      f.proto().add_evidence(shadow.seq());
      f.proto().add_evidence(req.seq());
      f.Headline(text::Show("{}'s NEEDED {} got an earlier load's copy, not the one its {} names", BaseName(o.path),
                            reuse.name(), render::StepWord(own.step)));
      f.Detail("requester", text::Show("{}, loaded {}", req.path(), req.loaded_by()));
      f.Detail("bound to", text::ShowBytes(Label(shadow)));
      f.Detail("loaded first", text::Show("{}{}", shadow.loaded_by(), LoadedAt(pi, shadow, ", ")));
      f.Detail("own search finds", text::Show("{} via {}", Label(would), would.found_by()));
      for (const std::string& path : {shadow.path(), would.path()})
        f.Detail("owner", text::Show("{}: {}", path, OwnerText(ctx.OwnerOf(path))));
      f.Detail("why",
               "glibc reuses a loaded object whose SONAME matches a DT_NEEDED name "
               "and does not search: import order decided");
      VersionDetails(ctx, o, reuse.name(), used->second.path, own.path, &f);
      if (o.rolled_back) f.Detail("outcome", text::Show("{} then failed to load", BaseName(o.path)));
      AddSwapFix(pi, o, used->second, &f);
      f.Fix(v1::FIX_PRELOAD_BY_PATH,
            text::Show("load the copy {}'s {} names before anything loads {}: LD_PRELOAD={}{}", BaseName(o.path),
                       render::StepWord(own.step), reuse.name(), text::ShellQuote(would.path()),
                       o.load->has_python() ? text::Show(", or ctypes.CDLL({}, mode=ctypes.RTLD_GLOBAL) first",
                                                         text::PythonString(would.path()))
                                            : ""),
            "LD_PRELOAD", would.path());
      std::move(f).AddTo(out);
    }
  }
}

void SearchOrder(Context& ctx, const ProcessIndex& pi, v1::Report* out) {
  for (const auto& [id, o] : pi.objects) {
    if (o.load == nullptr || o.load->tried_size() == 0) continue;
    if (render::FoundBy(*o.load) != v1::STEP_LD_LIBRARY_PATH) continue;
    auto req = pi.objects.find(o.requester);
    if (req == pi.objects.end()) continue;
    loader::Object r = pi.AsRequester(req->second, ctx.files());
    if (r.runpath.empty()) continue;
    // The requester's RUNPATH alone.
    loader::Environment only_runpath = pi.env;
    only_runpath.ld_library_path.clear();
    only_runpath.cache = nullptr;
    only_runpath.default_dirs.clear();
    r.nodeflib = true;
    const loader::Result own = loader::Search(o.load->requested_name(), r, {}, only_runpath);
    if (own.path.empty() || ctx.SameFile(own.path, o.path)) continue;
    FindingBuilder f(pi, v1::SEARCH_ORDER_SHADOWING, o.rolled_back ? v1::ERROR : v1::WARNING);
    const v1::Library got = ctx.Describe(pi, o);
    const v1::Library would = FileOnly(ctx, own.path, "RUNPATH");
    *f.proto().add_objects() = got;
    *f.proto().add_objects() = ctx.Describe(pi, req->second);
    *f.proto().add_objects() = would;
    f.proto().add_evidence(got.seq());
    f.Headline(text::Show("LD_LIBRARY_PATH's {} wins over the copy {}'s RUNPATH names", o.load->requested_name(),
                          BaseName(req->second.path)));
    f.Detail("requester", text::ShowBytes(NormalPath(req->second.path)));
    f.Detail("bound to", text::Show("{} via LD_LIBRARY_PATH", Label(got)));
    f.Detail("RUNPATH holds", text::ShowBytes(Label(would)));
    f.Detail("why", "LD_LIBRARY_PATH is searched before RUNPATH: the copy in the environment wins");
    VersionDetails(ctx, req->second, o.load->requested_name(), o.path, own.path, &f);
    if (o.rolled_back) f.Detail("outcome", text::Show("{} then failed to load", BaseName(req->second.path)));
    const std::string dir = got.path().substr(0, got.path().rfind('/'));
    std::string text =
        fmt::format("drop {} from LD_LIBRARY_PATH, so that {} gets {}", dir, BaseName(req->second.path), would.path());
    bool dropped = false;
    const std::string kept = LdLibraryPathWithout(pi, dir, &dropped);
    if (dropped)
      f.Fix(v1::FIX_DROP_FROM_LD_LIBRARY_PATH, text::ShowBytes(text), "LD_LIBRARY_PATH", kept);
    else
      f.Fix(v1::FIX_DROP_FROM_LD_LIBRARY_PATH, text::ShowBytes(text));
    std::move(f).AddTo(out);
  }
}

}  // namespace

void FindShadowing(Context& ctx, v1::Report* out) {
  for (const auto& pi : ctx.processes()) {
    ReusedNeeded(ctx, pi, out);
    SearchOrder(ctx, pi, out);
  }
}

}  // namespace ldscope::analysis
