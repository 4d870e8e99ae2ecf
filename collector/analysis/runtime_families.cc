// Runtime families across SONAMEs: one runtime loaded from several files that SONAME
// matching never relates (a wheel's libgomp-e985bcbb.so.1.0.0 beside libgomp.so.1,
// GNU libgomp beside LLVM libomp, two BLAS builds, two libstdc++, CUDA libraries of two
// installations). Same-SONAME copies are the duplicates pass's; fall-throughs that
// split a family are the fall-through pass's.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "text/escape.h"
#include "elf/elf_file.h"

namespace ldscope::analysis {
namespace {

struct Member {
  const Obj* o;
  RuntimeId id;
  std::string version;
};

// One member per distinct file (first loaded first), keeping only files alive together
// with another member.
std::vector<Member> Together(Context& ctx, const std::vector<Member>& ms) {
  std::vector<const Obj*> objs;
  for (const Member& m : ms) objs.push_back(m.o);
  std::vector<Member> out;
  for (const Obj* o : AliveTogether(ctx.DistinctFiles(std::move(objs))))
    out.push_back(*std::find_if(ms.begin(), ms.end(), [&](const Member& m) { return m.o == o; }));
  return out;
}

std::set<std::string> Sonames(const std::vector<Member>& ms) {
  std::set<std::string> s;
  for (const Member& m : ms) s.insert(m.o->soname.empty() ? BaseName(m.o->path) : m.o->soname);
  return s;
}

std::string HighestGlibcxx(Context& ctx, const std::string& path) {
  std::string best;
  if (const elf::ElfInfo* e = ctx.files().Get(path))
    for (const auto& d : e->verdefs)
      if (d.rfind("GLIBCXX_", 0) == 0 && (d.size() > best.size() || (d.size() == best.size() && d > best))) best = d;
  return best.empty() ? "unknown" : best;
}

class Pass {
 public:
  // classified: what Classify said of each (name, path), kept across processes (the
  // context's strings are shared: fork children inherit thousands of the same objects).
  using Classified = std::map<std::pair<const std::string*, const std::string*>, RuntimeId>;
  Pass(Context& ctx, const ProcessIndex& pi, Classified& classified, v1::Report* out)
      : ctx_(ctx), pi_(pi), out_(out), classified_(classified) {}

  void Run() {
    std::map<std::pair<int64_t, Runtime>, std::vector<Member>> by_runtime;
    std::map<std::pair<int64_t, std::string>, std::vector<Member>> cuda;
    for (const auto& [id, o] : pi_.objects) {
      if (o.rolled_back || o.path.empty()) continue;
      if (o.load != nullptr && (o.load->reason() == v1::LOAD_EXECUTABLE || o.load->reason() == v1::LOAD_VDSO)) continue;
      // Once per file and name: a churn's million objects are a few (the context's
      // strings are shared, so their addresses tell them apart).
      const Str& name = o.soname.empty() ? o.path : o.soname;
      auto [known, fresh] = classified_.try_emplace({&name.str(), &o.path.str()});
      if (fresh) known->second = Classify(name, ctx_.File(o.path));
      const RuntimeId& rid = known->second;
      if (rid.runtime == Runtime::kNone) continue;
      Member m{&o, rid, RuntimeVersion(ctx_, o, rid)};
      if (rid.runtime == Runtime::kCuda) cuda[{o.lmid, rid.implementation}].push_back(m);
      else by_runtime[{o.lmid, rid.runtime}].push_back(m);
    }
    for (const auto& ft : FallThroughs(ctx_, pi_)) fell_through_.insert(ft.object);
    for (auto& [key, ms] : by_runtime) {
      const auto together = Together(ctx_, ms);
      if (together.size() < 2) continue;
      if (key.second == Runtime::kOpenMP) OpenMP(together);
      if (key.second == Runtime::kBlas) Blas(together);
      if (key.second == Runtime::kCxx) Cxx(together);
    }
    for (auto& [key, ms] : cuda) Cuda(key.second, Together(ctx_, ms));
  }

 private:
  FindingBuilder Start(v1::Severity sev, const std::vector<Member>& ms) {
    FindingBuilder f(pi_, v1::RUNTIME_FAMILY, sev);
    for (const Member& m : ms) {
      *f.proto().add_objects() = ctx_.Describe(pi_, *m.o);
      f.proto().add_evidence(m.o->open_seq);
    }
    return f;
  }

  void Copies(FindingBuilder* f, const std::vector<Member>& ms, bool with_impl) {
    for (const Member& m : ms) {
      const std::string what = with_impl ? fmt::format("{} {}", m.id.implementation,
                                                       m.version == "unknown" ? "(version unknown)" : m.version)
                                         : (m.o->soname.empty() ? BaseName(m.o->path) : m.o->soname);
      f->Detail("loaded", text::Show("{}: {} ({})", what, NormalPath(m.o->path), ctx_.HowLoaded(pi_, *m.o)));
    }
  }

  // The entry points a member's callers use of it: the OpenMP names other objects of its
  // namespace import that it defines, and, when it was named itself (a dlopen of it, a
  // preload), the marker entry points it defines (its caller reaches them by dlsym).
  std::set<std::string> EntryPointsUsed(const Member& m) {
    static const char* const kPrefixes[] = {"omp_", "GOMP_", "GOACC_", "acc_", "__kmpc_", "kmp_", "__kmp_"};
    static const char* const kMarkers[] = {"omp_get_num_threads", "omp_set_num_threads", "GOMP_parallel",
                                           "__kmpc_fork_call"};
    std::set<std::string> used;
    const elf::ElfInfo* e = ctx_.File(m.o->path);
    if (e == nullptr) return used;
    const bool named =
        m.o->load != nullptr && (m.o->load->reason() == v1::LOAD_DLOPEN || m.o->load->reason() == v1::LOAD_PRELOAD);
    if (named)
      for (const char* n : kMarkers)
        if (e->Find(elf::SymbolQuery(n, "")).named) used.insert(n);
    for (const auto& [id, o] : pi_.objects) {
      if (&o == m.o || o.rolled_back || o.lmid != m.o->lmid || o.path.empty()) continue;
      const elf::ElfInfo* u = ctx_.File(o.path);
      if (u == nullptr || u == e) continue;
      u->ForEachUndefined([&](const elf::Symbol& s, const elf::SymbolQuery& q) {
        bool openmp = false;
        for (const char* p : kPrefixes) openmp |= s.name.rfind(p, 0) == 0;
        if (openmp && e->Find(q).named) used.insert(std::string(s.name));
      });
    }
    return used;
  }

  // What `a` lacks of the entry points the callers of the other runtimes use: empty when
  // a, loaded first, serves every call (ld.so binds each name to the first definition
  // of the global scope).
  std::set<std::string> Lacks(const Member& a, const std::vector<Member>& ms,
                              std::map<const Obj*, std::set<std::string>>& used) {
    std::set<std::string> lacks;
    const elf::ElfInfo* e = ctx_.File(a.o->path);
    for (const Member& b : ms) {
      if (b.id.implementation == a.id.implementation) continue;
      auto it = used.find(b.o);
      if (it == used.end()) it = used.emplace(b.o, EntryPointsUsed(b)).first;
      for (const std::string& n : it->second)
        if (e == nullptr || !e->Find(elf::SymbolQuery(n, "")).named) lacks.insert(n);
    }
    return lacks;
  }

  void OpenMP(const std::vector<Member>& ms) {
    std::set<std::string> impls;
    for (const Member& m : ms) impls.insert(m.id.implementation);
    if (impls.size() >= 2) {
      std::map<const Obj*, std::set<std::string>> used;
      const Member* preloaded = nullptr;
      for (const Member& m : ms)
        if (preloaded == nullptr && m.o->load != nullptr && m.o->load->reason() == v1::LOAD_PRELOAD) preloaded = &m;
      std::set<std::string> preloaded_lacks;
      if (preloaded != nullptr) {
        preloaded_lacks = Lacks(*preloaded, ms, used);
        // The preloaded runtime defines every entry point the others' callers use: the
        // others are loaded, but every call reaches the preloaded one.
        if (preloaded_lacks.empty()) return;
      }
      // A runtime that can serve the others' callers, if one can.
      const Member* serves = nullptr;
      std::vector<std::string> lacking;
      for (const Member& m : ms) {
        if (&m == preloaded) continue;
        const std::set<std::string> l = Lacks(m, ms, used);
        if (l.empty() && serves == nullptr) serves = &m;
        if (!l.empty()) lacking.push_back(fmt::format("{} lacks {}", m.id.implementation, fmt::join(l, ", ")));
      }
      auto f = Start(v1::WARNING, ms);
      f.Headline(
          text::Show("{} different OpenMP runtimes loaded together: {}", impls.size(), fmt::join(impls, " and ")));
      Copies(&f, ms, true);
      f.Detail("why it matters",
               "two OpenMP runtimes each start their own thread pools; "
               "together they oversubscribe, crash or deadlock");
      if (preloaded != nullptr)
        f.Detail("preloaded", text::Show("{} comes first, but it lacks {}, which the other runtime's callers use: "
                                         "a preload does not stop another runtime from loading",
                                         preloaded->id.implementation, fmt::join(preloaded_lacks, ", ")));
      if (serves != nullptr) {
        f.Fix(v1::FIX_PRELOAD_BY_PATH,
              text::Show("load {} first, so that it serves every OpenMP call (it defines each entry point the "
                         "other's callers use): LD_PRELOAD={}{}",
                         serves->id.implementation, text::ShellQuote(NormalPath(serves->o->path)),
                         preloaded != nullptr ? fmt::format(" in place of {}", BaseName(preloaded->o->path)) : ""),
              "LD_PRELOAD", NormalPath(serves->o->path));
      } else {
        if (preloaded == nullptr) f.Detail("neither serves the other", text::Show("{}", fmt::join(lacking, "; ")));
        // The runtimes to stop loading: those that are not the first (or the preloaded).
        const Member& kept = preloaded != nullptr ? *preloaded : ms.front();
        std::vector<std::string> others;
        for (const Member& m : ms)
          if (m.id.implementation != kept.id.implementation)
            others.push_back(fmt::format("{} ({})", NormalPath(m.o->path), ctx_.HowLoaded(pi_, *m.o)));
        f.Fix(v1::FIX_PIN_VERSION, text::Show("load one runtime: stop loading {}, or install builds of the "
                                              "packages that share {}",
                                              fmt::join(others, " and "), kept.id.implementation));
      }
      f.Fix(v1::FIX_SET_VARIABLE,
            "as a stopgap for Intel's runtime beside another: KMP_DUPLICATE_LIB_OK=TRUE "
            "(hides the check, not the conflict)",
            "KMP_DUPLICATE_LIB_OK", "TRUE");
      std::move(f).AddTo(out_);
      return;
    }
    if (Sonames(ms).size() < 2) return;  // one SONAME twice: the duplicates pass
    auto f = Start(v1::INFO, ms);
    f.Headline(
        text::Show("OpenMP runtime: {} copies of {} (each keeps its own thread settings)", ms.size(), *impls.begin()));
    Copies(&f, ms, false);
    f.Fix(v1::FIX_SET_VARIABLE,
          "set OMP_NUM_THREADS for the process: omp_set_num_threads() in one copy "
          "does not reach the others");
    std::move(f).AddTo(out_);
  }

  void Blas(const std::vector<Member>& ms) {
    // One installation counts once: Debian's libblas.so.3, liblapack.so.3 and
    // libopenblas.so.0 of one OpenBLAS build live side by side.
    std::vector<Member> installs;
    for (const Member& m : ms) {
      bool same = false;
      for (const Member& i : installs)
        same |= i.id.implementation == m.id.implementation && i.version == m.version &&
                DirName(NormalPath(i.o->path)) == DirName(NormalPath(m.o->path));
      if (!same) installs.push_back(m);
    }
    if (installs.size() < 2) return;
    std::vector<const Member*> plain;
    std::set<std::string> impls;
    for (const Member& m : installs) {
      impls.insert(m.id.implementation);
      if (m.id.blas_names) plain.push_back(&m);
    }
    bool clash = false;
    for (const Member* a : plain)
      for (const Member* b : plain) clash |= a->id.implementation != b->id.implementation;
    if (clash) {
      auto f = Start(v1::WARNING, installs);
      f.Headline(text::Show("two BLAS libraries export the same names (dgemm_ ...): {}", fmt::join(impls, " and ")));
      Copies(&f, installs, true);
      f.Detail("why it matters",
               "each BLAS call binds to whichever copy comes first in the caller's "
               "lookup scope, so callers can mix the two builds");
      f.Fix(v1::FIX_PIN_VERSION,
            "use one BLAS for every package (one alternative: update-alternatives "
            "--config libblas.so.3-x86_64-linux-gnu, or wheels that bundle theirs under "
            "renamed symbols)");
      std::move(f).AddTo(out_);
      return;
    }
    auto f = Start(v1::INFO, installs);
    f.Headline(text::Show("BLAS/LAPACK: {} builds loaded (as threadpoolctl lists them)", installs.size()));
    Copies(&f, installs, true);
    f.Fix(v1::FIX_SET_VARIABLE,
          "thread limits must reach each: set OPENBLAS_NUM_THREADS/MKL_NUM_THREADS "
          "(or use threadpoolctl) rather than one library's API");
    std::move(f).AddTo(out_);
  }

  void Cxx(const std::vector<Member>& ms) {
    if (Sonames(ms).size() < 2) return;
    // What objects loaded after the first copy require of the C++ runtime.
    std::string required, required_by;
    for (const auto& [id, o] : pi_.objects) {
      if (o.open_seq <= ms.front().o->open_seq || o.lmid != ms.front().o->lmid) continue;
      const elf::ElfInfo* e = ctx_.File(o.path);
      if (e == nullptr) continue;
      for (const auto& vn : e->verneeds)
        for (const auto& v : vn.versions)
          if (v.rfind("GLIBCXX_", 0) == 0 && (v.size() > required.size() || (v.size() == required.size() && v > required))) {
            required = v;
            required_by = NormalPath(o.path);
          }
    }
    auto f = Start(v1::WARNING, ms);
    f.Headline(text::Show("two C++ runtimes (libstdc++) loaded; {} came first", BaseName(ms.front().o->path)));
    for (const Member& m : ms)
      f.Detail("loaded", text::Show("{} (offers up to {}), {}", NormalPath(m.o->path), HighestGlibcxx(ctx_, m.o->path),
                                    ctx_.HowLoaded(pi_, *m.o)));
    if (!required.empty()) f.Detail("required", text::Show("{} by {}", required, required_by));
    const Member* newest = &ms.front();
    for (const Member& m : ms) {
      const std::string a = HighestGlibcxx(ctx_, m.o->path), b = HighestGlibcxx(ctx_, newest->o->path);
      if (a != "unknown" && (b == "unknown" || a.size() > b.size() || (a.size() == b.size() && a > b))) newest = &m;
    }
    const std::string need = required.empty() ? HighestGlibcxx(ctx_, newest->o->path) : required;
    if (newest->o->soname == "libstdc++.so.6")
      f.Fix(v1::FIX_PRELOAD_BY_PATH,
            text::Show("load the newest copy first, for every object to share it: "
                       "LD_PRELOAD={}",
                       text::ShellQuote(NormalPath(newest->o->path))),
            "LD_PRELOAD", NormalPath(newest->o->path));
    else
      f.Fix(v1::FIX_INSTALL, text::Show("{} cannot stand in for libstdc++.so.6 (another SONAME): install a "
                                        "libstdc++.so.6 that offers {} (a newer GCC's) and load it first, so "
                                        "that one runtime serves every object",
                                        BaseName(newest->o->path), need));
    std::move(f).AddTo(out_);
  }

  void Cuda(const std::string& component, const std::vector<Member>& ms) {
    if (ms.size() < 2 || Sonames(ms).size() < 2) return;  // one SONAME twice: the duplicates pass
    for (const Member& m : ms)
      if (fell_through_.count(m.o)) return;  // the fall-through pass tells that story
    std::set<std::string> dirs, families;
    std::map<std::string, std::set<std::string>> sonames_by_family;
    for (const Member& m : ms) {
      dirs.insert(DirName(NormalPath(m.o->path)));
      sonames_by_family[Family(m.o->soname.empty() ? m.o->path : m.o->soname)].insert(m.o->soname);
    }
    bool two_versions = false;
    for (const auto& [fam, s] : sonames_by_family) two_versions |= s.size() >= 2;
    if (dirs.size() < 2 && !two_versions) return;
    auto f = Start(v1::WARNING, ms);
    f.Headline(text::ShowBytes(two_versions
                                   ? fmt::format("{} of two CUDA versions loaded together", component)
                                   : fmt::format("{} libraries from {} installations", component, dirs.size())));
    Copies(&f, ms, false);
    if (two_versions)
      f.Fix(v1::FIX_PIN_VERSION, text::Show("install every package's build for one CUDA major version, so "
                                            "that one of {} is loaded",
                                            fmt::join(Sonames(ms), " and ")));
    else
      f.Fix(v1::FIX_PIN_VERSION, text::Show("load every {} library from one installation ({}): install the "
                                            "matching package there, or drop the other directory from the "
                                            "search path",
                                            component, *dirs.begin()));
    std::move(f).AddTo(out_);
  }

  Context& ctx_;
  const ProcessIndex& pi_;
  v1::Report* out_;
  Classified& classified_;
  std::set<const Obj*> fell_through_;
};

}  // namespace

void FindRuntimeFamilies(Context& ctx, v1::Report* out) {
  Pass::Classified classified;
  for (const auto& pi : ctx.processes()) Pass(ctx, pi, classified, out).Run();
}

}  // namespace ldscope::analysis
