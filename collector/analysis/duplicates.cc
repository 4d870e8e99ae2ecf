// Duplicate libraries: two different files with one SONAME alive together in one
// namespace (the second NCCL that import order produces), and, as information, one
// family under several sonames or in several dlmopen namespaces.
#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "analysis/owners.h"
#include "text/escape.h"
#include "render/python_text.h"

namespace ldscope::analysis {
namespace {

bool Counts(const Obj& o) {
  if (o.load == nullptr) return !o.path.empty();
  const auto r = o.load->reason();
  return r != v1::LOAD_EXECUTABLE && r != v1::LOAD_VDSO;
}

std::string Key(const Obj& o) { return o.soname; }

// One copy for every user: load the first one where the second is loaded now.
void DuplicateFixes(Context& ctx, const ProcessIndex& pi, const Obj& first, const Obj& second, FindingBuilder* f) {
  const std::string one = NormalPath(first.path), other = NormalPath(second.path);
  const bool dlopen = second.load != nullptr && second.load->reason() == v1::LOAD_DLOPEN;
  if (dlopen) {
    const v1::PyCause& py = second.load->python();
    const std::string where =
        py.dlopen_call().empty()
            ? "the dlopen of " + second.load->requested_name()
            : fmt::format("{} at {}", py.dlopen_call(), render::PyFrameText(py.call_site(), pi.p->cwd()));
    f->Fix(v1::FIX_LOAD_BY_PATH,
           text::Show("make {} load {} (the copy already loaded) instead of {}", where, one, other));
  } else if (first.load != nullptr && first.load->reason() == v1::LOAD_PRELOAD) {
    // The preload is in effect already: the other copy came by its path (a dlopen of a
    // path, a NEEDED entry with a '/'), which glibc matches by file, never by SONAME.
    f->Fix(v1::FIX_LOAD_BY_PATH,
           text::Show("make what loads {} by its path load {} instead: {} is preloaded already, and a "
                      "load by path does not reuse a copy by its SONAME",
                      other, one, one));
  } else {
    f->Fix(v1::FIX_PRELOAD_BY_PATH,
           text::Show("LD_PRELOAD={} makes every NEEDED {} reuse that copy", text::ShellQuote(one), first.soname),
           "LD_PRELOAD", one);
  }
  // Each copy's package, and the command that installs its version (the pin the other
  // user can follow), or that no package owns it.
  auto whose = [&](const std::string& path) {
    const v1::Owner* o = ctx.OwnerOf(path);
    const text::Shown pin = PinCommand(o);
    if (!pin.empty()) return text::Show("{} comes from the {} (`{}`)", path, OwnerText(o), pin);
    if (o != nullptr && o->manager() == v1::OwnerFacts::MANAGER_NONE)
      return text::Show("{} is not owned by any package (remove it or replace it by hand)", path);
    return text::Show("{}'s package is {}", path, OwnerText(o));
  };
  f->Fix(v1::FIX_PIN_VERSION,
         text::Show("or install one version of {} for both users: {}; {}", first.soname, whose(one), whose(other)));
}

using NsKey = std::pair<int64_t, std::string>;  // (namespace, SONAME or family)
using Objs = std::vector<const Obj*>;

// One process's objects that can be copies of each other, grouped three ways.
struct Groups {
  std::map<NsKey, Objs> by_soname;               // per namespace and SONAME
  std::map<std::string, Objs> by_soname_any_ns;  // per SONAME
  std::map<NsKey, Objs> by_family;               // per namespace and family
};

// family: each SONAME's family (by the context's string), kept across processes.
Groups GroupObjects(const ProcessIndex& pi, std::unordered_map<const std::string*, std::string>& family) {
  // Gathered by (namespace, SONAME string of the context's pool) first: a churn's million
  // objects are a few groups, each SONAME's family worked out once.
  struct Group {
    const std::string* soname;
    const std::string* family;
    Objs objs;
  };
  struct ByKey {
    size_t operator()(const std::pair<int64_t, const std::string*>& k) const {
      return std::hash<const void*>()(k.second) * 31 + static_cast<size_t>(k.first);
    }
  };
  std::unordered_map<std::pair<int64_t, const std::string*>, Group, ByKey> gathered;
  for (const auto& [id, o] : pi.objects) {
    // Without a SONAME nothing can bind to an object by name: same-named Python
    // extension modules of different packages are different modules, not copies.
    if (!Counts(o) || o.soname.empty()) continue;
    auto [fam, fresh] = family.try_emplace(&o.soname.str());
    if (fresh) fam->second = Family(Key(o));
    // Copies of the CUDA driver library are the CUDA driver pass's (cuda_driver.cc).
    if (fam->second == "libcuda") continue;
    Group& group = gathered[{o.lmid, &o.soname.str()}];
    group.soname = &o.soname.str();
    group.family = &fam->second;
    group.objs.push_back(&o);
  }
  // Every finding of this pass is about two objects or more of a group: a group of one
  // is left out (a fork child's thousands of inherited libraries, each of its own SONAME,
  // are not grouped and sorted again for each child).
  struct ByFamily {
    size_t operator()(const std::pair<int64_t, std::string_view>& k) const {
      return std::hash<std::string_view>()(k.second) * 31 + static_cast<size_t>(k.first);
    }
  };
  std::unordered_map<const std::string*, size_t> any_ns_count;
  std::unordered_map<std::pair<int64_t, std::string_view>, size_t, ByFamily> family_count;
  for (const auto& [key, group] : gathered) {
    any_ns_count[group.soname] += group.objs.size();
    family_count[{key.first, *group.family}] += group.objs.size();
  }
  // In id order within each group, as the objects came.
  Groups g;
  for (auto& [key, group] : gathered) {
    if (group.objs.size() >= 2) {
      Objs& by_soname = g.by_soname[{key.first, *group.soname}];
      by_soname.insert(by_soname.end(), group.objs.begin(), group.objs.end());
    }
    if (any_ns_count[group.soname] >= 2) {
      Objs& any_ns = g.by_soname_any_ns[*group.soname];
      any_ns.insert(any_ns.end(), group.objs.begin(), group.objs.end());
    }
    if (family_count[{key.first, *group.family}] >= 2) {
      Objs& by_family = g.by_family[{key.first, *group.family}];
      by_family.insert(by_family.end(), group.objs.begin(), group.objs.end());
    }
  }
  // A SONAME's objects across namespaces, a family's across SONAMEs: in id order again.
  const auto by_id = [](const Obj* a, const Obj* b) { return a->id < b->id; };
  for (auto& [key, objs] : g.by_soname_any_ns) SortUnlessSorted(objs, by_id);
  for (auto& [key, objs] : g.by_family) SortUnlessSorted(objs, by_id);
  return g;
}

// A warning when two or more files with one SONAME are alive together in a namespace.
void FindCopies(Context& ctx, const ProcessIndex& pi, const NsKey& key, const Objs& objs,
                v1::Report* out) {
  const Objs together = AliveTogether(ctx.DistinctFiles(objs));  // only copies alive together conflict
  if (together.size() < 2) return;
  FindingBuilder f(pi, v1::DUPLICATE_LIBRARY, v1::WARNING);
  for (const Obj* o : together) {
    *f.proto().add_objects() = ctx.Describe(pi, *o);
    f.proto().add_evidence(o->open_seq);
  }
  f.Headline(text::Show("{} copies of {} are loaded together (namespace {})",
                        together.size() == 2 ? "two" : std::to_string(together.size()), key.second, key.first));
  for (const auto& l : f.proto().objects())
    f.Detail("copy", text::Show("{}, loaded {}{}", Label(l), l.loaded_by(), LoadedAt(pi, l, ", ")));
  for (const Obj* o : together)
    f.Detail("owner", text::Show("{}: {}", NormalPath(o->path), OwnerText(ctx.OwnerOf(o->path))));
  f.Detail("why",
           "they share a SONAME: each symbol both define binds to whichever copy a "
           "lookup scope reaches first, and state (communicators, handles) can split");
  DuplicateFixes(ctx, pi, *together[0], *together[1], &f);
  std::move(f).AddTo(out);
}

// Information: libraries in several namespaces (deliberate with dlmopen), one
// finding per set of namespaces.
void FindNamespaceSets(Context& ctx, const ProcessIndex& pi,
                       const std::map<std::string, Objs>& by_soname_any_ns, v1::Report* out) {
  std::map<std::vector<int64_t>, std::vector<std::pair<std::string, Objs>>> by_ns_set;
  for (const auto& [soname, objs] : by_soname_any_ns) {
    std::vector<int64_t> namespaces;
    for (const Obj* o : objs)
      if (std::find(namespaces.begin(), namespaces.end(), o->lmid) == namespaces.end())
        namespaces.push_back(o->lmid);
    std::sort(namespaces.begin(), namespaces.end());
    if (namespaces.size() >= 2) by_ns_set[namespaces].push_back({soname, objs});
  }
  for (const auto& [namespaces, libs] : by_ns_set) {
    FindingBuilder f(pi, v1::DUPLICATE_INFO, v1::INFO);
    std::vector<std::string> sonames;
    for (const auto& [soname, objs] : libs) {
      sonames.push_back(soname);
      for (const Obj* o : objs) {
        *f.proto().add_objects() = ctx.Describe(pi, *o);
        f.proto().add_evidence(o->open_seq);
      }
    }
    const std::string names = fmt::format("{}", fmt::join(sonames, ", "));
    const std::string ns_list = fmt::format("{}", fmt::join(namespaces, ", "));
    f.Headline(text::Show("{} loaded in each of namespaces {} (dlmopen isolation)", names, ns_list));
    f.Detail("namespaces", text::ShowBytes(ns_list));
    f.Detail("why",
             "namespaces do not share symbols: deliberate isolation (dlmopen), not a "
             "conflict; nothing to do");
    std::move(f).AddTo(out);
  }
}

// Information: one family under several sonames in one namespace.
void FindFamilySonames(Context& ctx, const ProcessIndex& pi, const NsKey& key, const Objs& objs,
                       v1::Report* out) {
  std::vector<std::string> sonames;
  for (const Obj* o : objs)
    if (std::find(sonames.begin(), sonames.end(), Key(*o)) == sonames.end()) sonames.push_back(Key(*o));
  if (sonames.size() < 2) return;
  // Runtimes (OpenMP, BLAS, libstdc++, CUDA) are the runtime-family pass's.
  if (Classify(key.second, nullptr).runtime != Runtime::kNone) return;
  FindingBuilder f(pi, v1::DUPLICATE_INFO, v1::INFO);
  for (const Obj* o : ctx.DistinctFiles(objs)) {
    *f.proto().add_objects() = ctx.Describe(pi, *o);
    f.proto().add_evidence(o->open_seq);
  }
  f.Headline(text::Show("{} is loaded under {} sonames (namespace {})", key.second, sonames.size(), key.first));
  for (const auto& l : f.proto().objects())
    f.Detail("copy", text::Show("{} (soname {}), loaded {}", Label(l), l.soname(), l.loaded_by()));
  f.Detail("why",
           "different sonames do not replace each other: both stay loaded, and "
           "symbols they share bind to whichever a lookup scope reaches first");
  std::move(f).AddTo(out);
}

}  // namespace

// Per process: copies of one SONAME loaded together, then libraries in several
// namespaces, then families under several sonames.
void FindDuplicates(Context& ctx, v1::Report* out) {
  std::unordered_map<const std::string*, std::string> family;
  for (const auto& pi : ctx.processes()) {
    const Groups g = GroupObjects(pi, family);
    for (const auto& [key, objs] : g.by_soname) FindCopies(ctx, pi, key, objs, out);
    FindNamespaceSets(ctx, pi, g.by_soname_any_ns, out);
    for (const auto& [key, objs] : g.by_family) FindFamilySonames(ctx, pi, key, objs, out);
  }
}

}  // namespace ldscope::analysis
