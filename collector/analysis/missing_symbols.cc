// Missing symbols: for objects whose dlopen failed, the undefined non-weak symbols and
// the symbol versions that no object in reach defines, each with the file on disk
// that the object's own search path would have bound instead and that defines it. For
// objects that loaded (lazy binding), functions nothing defines: the first call fails.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "model/python.h"

namespace ldscope::analysis {
namespace {

std::string Normal(const std::string& p) { return NormalPath(p); }

struct Missing {
  std::string name, version, needed_name;  // needed_name: the NEEDED that should provide it
  const Obj* bound = nullptr;
  std::string provider;
  std::string provider_step;
  bool version_only = false;  // "version V not found" (no symbol name)
  bool behind_env = false;    // the provider is found only without LD_LIBRARY_PATH
  std::string out_of_scope;   // a loaded object that defines it but is not in scope
};

// Records m in the finding's structured list.
void AddMissing(v1::Finding* f, const Missing& m, const Obj& o) {
  auto* x = f->add_missing();
  x->set_name(m.name);
  x->set_version(m.version);
  x->set_needed_by(o.path);
  if (m.bound) x->set_bound_to(NormalPath(m.bound->path));
  x->set_provider(m.provider);
}

// The undefined, non-weak symbols of e that nothing in scope defines.
void UndefinedIn(const elf::ElfInfo& e, const std::vector<const SymbolIndex*>& scope,
                 std::vector<Missing>* out) {
  for (const auto& s : e.symbols) {
    if (s.defined || s.weak || AnyDefines(scope, s.name, s.version)) continue;
    Missing m;
    m.name = s.name;
    m.version = s.version;
    m.needed_name = s.version_file;
    out->push_back(m);
  }
}

// The object glibc bound O's NEEDED name to.
const Obj* BoundFor(const ProcessIndex& pi, const Obj& o, const std::string& name) {
  if (o.load != nullptr)
    for (const auto& r : o.load->reused())
      if (r.name() == name) {
        auto it = pi.objects.find(r.object().id());
        if (it != pi.objects.end()) return &it->second;
      }
  for (const auto& [id, other] : pi.objects)
    if (other.requester == o.id && other.load != nullptr && other.load->requested_name() == name)
      return &other;
  for (const Obj* other : pi.AliveAt(o.lmid, o.open_seq))
    if (other->soname == name) return other;
  return nullptr;
}

std::string SymbolList(const std::vector<const Missing*>& ms) {
  std::vector<std::string> names;
  for (const Missing* m : ms)
    names.push_back(m->version_only ? fmt::format("version '{}' of {}", m->version, m->needed_name)
                    : m->version.empty() ? m->name
                                         : fmt::format("{}@{}", m->name, m->version));
  if (names.size() == 1) return names[0];
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 4);
  for (size_t i = 0; i < shown; ++i) out += (i == 0 ? "" : i + 1 == shown && shown == names.size() ? " and " : ", ") + names[i];
  if (names.size() > shown) out += fmt::format(" and {} more", names.size() - shown);
  return out;
}

class Pass {
 public:
  Pass(Context& ctx, v1::Report* out) : ctx_(ctx), out_(out) {}

  void Run() {
    for (const auto& pi : ctx_.processes()) {
      for (const auto& e : pi.p->entries()) {
        if (!e.has_failed_dlopen()) continue;
        BatchScope scope;  // built once per failed dlopen
        // The dlopen's root: the first object it mapped.
        const Obj* root = nullptr;
        for (const auto& r : e.failed_dlopen().rolled_back()) {
          auto it = pi.objects.find(r.id());
          if (it != pi.objects.end() && it->second.load != nullptr &&
              (root == nullptr || it->second.open_seq < root->open_seq))
            root = &it->second;
        }
        for (const auto& r : e.failed_dlopen().rolled_back()) {
          auto it = pi.objects.find(r.id());
          if (it != pi.objects.end() && it->second.load != nullptr)
            FailedObject(pi, it->second, e.seq(), *root, &scope);
        }
      }
      Lazy(pi);
    }
  }

 private:
  // glibc's lookup scope for the objects of a failed dlopen: the global scope (the
  // executable and what it needed at start-up) and the local scope of the dlopen's
  // root (its dependency closure, following what each NEEDED was bound to), plus ld.so.
  // Objects that other dlopens loaded with RTLD_LOCAL are not in it, however many
  // symbols they define: that is how a preloaded copy can fail to help.
  std::vector<const SymbolIndex*> Scope(const ProcessIndex& pi, const Obj& root, uint64_t seq,
                                        std::vector<const Obj*>* members) {
    uint64_t first_dlopen = UINT64_MAX;
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() == v1::LOAD_DLOPEN)
        first_dlopen = std::min(first_dlopen, o.open_seq);
    std::vector<const Obj*> queue;
    auto add = [&](const Obj* o) {
      if (o != nullptr && std::find(queue.begin(), queue.end(), o) == queue.end()) queue.push_back(o);
    };
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.open_seq < first_dlopen && o.lmid == root.lmid &&
          o.close_seq > seq)
        add(&o);
    add(&root);
    for (size_t i = 0; i < queue.size(); ++i) {
      if (queue[i]->load == nullptr) continue;
      for (const auto& n : queue[i]->load->needed()) add(BoundFor(pi, *queue[i], n));
    }
    std::vector<const SymbolIndex*> scope;
    for (const Obj* o : queue)
      if (const SymbolIndex* s = ctx_.files().Symbols(o->path)) scope.push_back(s);
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() == v1::LOAD_INTERPRETER)
        if (const SymbolIndex* s = ctx_.files().Symbols(o.path)) scope.push_back(s);
    *members = std::move(queue);
    return scope;
  }

  // Fills bound/provider for m from o's NEEDED entries: the file o's own search finds,
  // or, when LD_LIBRARY_PATH took that place, the one its RPATH/RUNPATH holds.
  void Attribute(const ProcessIndex& pi, const Obj& o, const elf::ElfInfo& info, Missing* m) {
    loader::Environment no_env = pi.env;
    no_env.ld_library_path.clear();
    for (const auto& n : info.needed) {
      if (!m->needed_name.empty() && n != m->needed_name) continue;
      for (const loader::Environment* env : {static_cast<const loader::Environment*>(&pi.env), static_cast<const loader::Environment*>(&no_env)}) {
        const loader::Result own = loader::Search(n, pi.AsRequester(o, ctx_.files()),
                                                  pi.LoaderChain(o, ctx_.files()), *env);
        const SymbolIndex* f = own.path.empty() ? nullptr : ctx_.files().Symbols(own.path);
        const bool defines = f != nullptr && (m->version_only ? f->DefinesVersion(m->version)
                                                              : f->Defines(m->name, m->version));
        if (!defines) continue;
        m->needed_name = n;
        m->bound = BoundFor(pi, o, n);
        m->provider = Normal(own.path);
        m->provider_step = loader::StepName(own.step);
        m->behind_env = env == &no_env;
        return;
      }
    }
    if (!m->needed_name.empty()) m->bound = BoundFor(pi, o, m->needed_name);
  }

  struct BatchScope {
    std::vector<const SymbolIndex*> scope;
    std::vector<const Obj*> members;
  };

  void FailedObject(const ProcessIndex& pi, const Obj& o, uint64_t seq, const Obj& root,
                    BatchScope* batch) {
    const elf::ElfInfo* info = ctx_.files().Get(o.path);
    if (info == nullptr) return;
    // A NEEDED found nowhere fails the dlopen before any symbol is looked up.
    std::vector<std::string> not_found;
    for (const auto& n : info->needed)
      if (BoundFor(pi, o, n) == nullptr) not_found.push_back(n);
    if (!not_found.empty()) {
      MissingLibrary(pi, o, not_found);
      return;
    }
    if (batch->scope.empty()) batch->scope = Scope(pi, root, seq, &batch->members);
    const auto* reach = &batch->scope;
    std::vector<Missing> missing;
    // Version needs are checked first by glibc (_dl_check_map_versions).
    for (const auto& vn : info->verneeds) {
      const Obj* bound = BoundFor(pi, o, vn.file);
      const SymbolIndex* b = bound ? ctx_.files().Symbols(bound->path) : nullptr;
      if (b == nullptr) continue;
      for (const auto& v : vn.versions) {
        if (b->DefinesVersion(v)) continue;
        Missing m;
        m.version = v;
        m.needed_name = vn.file;
        m.version_only = true;
        missing.push_back(m);
      }
    }
    UndefinedIn(*info, *reach, &missing);
    if (missing.empty()) return;
    // Objects alive but outside the scope that define a missing symbol: worth naming.
    for (const Obj* other : pi.AliveAt(o.lmid, seq > 0 ? seq - 1 : 0)) {
      if (std::find(batch->members.begin(), batch->members.end(), other) != batch->members.end())
        continue;
      const SymbolIndex* idx = ctx_.files().Symbols(other->path);
      if (idx == nullptr) continue;
      for (auto& m : missing)
        if (m.out_of_scope.empty() && !m.version_only && idx->Defines(m.name, m.version))
          m.out_of_scope = NormalPath(other->path);
    }
    for (auto& m : missing) Attribute(pi, o, *info, &m);
    Report(pi, o, missing);
  }

  void MissingLibrary(const ProcessIndex& pi, const Obj& o, const std::vector<std::string>& names) {
    auto f = NewFinding(pi, v1::MISSING_LIBRARY, v1::INFO);
    *f.add_objects() = ctx_.Describe(pi, o);
    f.add_evidence(o.open_seq);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    f.set_message(fmt::format(
        "{} could not be loaded: its NEEDED {} {} found nowhere on its search path, so the "
        "dlopen {} (loaded {}) failed. Packages often probe for optional components this way; "
        "if the program needs it, install it or put its directory on the search path.",
        BaseName(o.path), list, names.size() == 1 ? "was" : "were", BaseName(o.path),
        ctx_.HowLoaded(pi, o)));
    *out_->add_findings() = std::move(f);
  }

  // " (for import torch._C at torch/__init__.py:4, during import torch at train.py:4)":
  // what the Python program was doing when the load failed.
  static std::string PythonContext(const ProcessIndex& pi, const Obj& o) {
    if (o.load == nullptr) return "";
    const std::string cause = model::PyCauseText(o.load->python(), pi.p->cwd());
    return cause.empty() ? "" : " (for " + cause + ")";
  }

  void Report(const ProcessIndex& pi, const Obj& o, const std::vector<Missing>& missing) {
    auto f = NewFinding(pi, v1::MISSING_SYMBOL, v1::ERROR);
    *f.add_objects() = ctx_.Describe(pi, o);
    f.add_evidence(o.open_seq);
    // Group by (bound object, provider): one sentence per group.
    std::vector<std::pair<std::pair<const Obj*, std::string>, std::vector<const Missing*>>> groups;
    for (const auto& m : missing) {
      AddMissing(&f, m, o);
      const auto key = std::make_pair(m.bound, m.provider);
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == key; });
      if (g == groups.end()) groups.push_back({key, {&m}});
      else g->second.push_back(&m);
    }
    // The group with a provider first: that is the explanation.
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto& a, const auto& b) { return !a.first.second.empty() && b.first.second.empty(); });
    std::string msg;
    for (const auto& [key, ms] : groups) {
      const Obj* bound = key.first;
      const std::string& provider = key.second;
      const Missing& m0 = *ms.front();
      const std::string base = BaseName(o.path);
      std::string s;
      const bool reused = bound != nullptr && bound->open_seq < o.open_seq && bound->requester != o.id;
      const char* pronoun = ms.size() == 1 ? "it" : "them";
      if (bound != nullptr) {
        const v1::Library b = ctx_.Describe(pi, *bound);
        *f.add_objects() = b;
        f.add_evidence(b.seq());
        if (reused) {
          s = fmt::format("it needs {}, which the {} it was bound to — {}, already loaded at "
                          "+{:.1f} ms {} — does not define. glibc reused that object because "
                          "its SONAME matches {}'s DT_NEEDED {}, so {}'s own {} was never searched",
                          SymbolList(ms), m0.needed_name, Label(b), b.at_ms(), b.loaded_by(), base,
                          m0.needed_name, base,
                          provider.empty() ? std::string("search path") : m0.provider_step);
        } else {
          s = fmt::format("it needs {}, which {} (its {}{}) does not define", SymbolList(ms),
                          Label(b), m0.needed_name,
                          b.found_by().empty() ? "" : ", found via " + b.found_by());
        }
      } else {
        s = fmt::format("it needs {}, which no loaded object defines", SymbolList(ms));
      }
      if (!provider.empty()) {
        v1::Library p;
        p.set_path(provider);
        p.set_version(ctx_.VersionOf(provider, m0.needed_name));
        p.set_found_by(m0.provider_step);
        *f.add_objects() = p;
        if (reused)
          s += fmt::format("; there it would have found {}, which defines {}", Label(p), pronoun);
        else if (m0.behind_env)
          s += fmt::format("; its own {} holds {}, which defines {}, but LD_LIBRARY_PATH is "
                           "searched first", m0.provider_step, Label(p), pronoun);
        else
          s += fmt::format("; {} ({}) defines {}", Label(p), m0.provider_step, pronoun);
      } else {
        s += fmt::format("; no file on its search path defines {} either", pronoun);
      }
      if (!m0.out_of_scope.empty() && m0.out_of_scope == provider)
        s += fmt::format(" — that file is even loaded already, but by another dlopen, in a local "
                         "scope {} cannot see", base);
      else if (!m0.out_of_scope.empty())
        s += fmt::format(" ({} is loaded and defines {}, but by another dlopen, in a local scope "
                         "{} cannot see)",
                         m0.out_of_scope, ms.size() == 1 ? "it" : "some of them", base);
      msg += msg.empty() ? fmt::format("{}{} failed to load: {}.", base, PythonContext(pi, o), s)
                         : fmt::format(" Also, {}.", s);
    }
    f.set_message(msg);
    *out_->add_findings() = std::move(f);
  }

  // Objects that loaded but call functions nothing in their namespace defines.
  void Lazy(const ProcessIndex& pi) {
    std::map<int64_t, std::vector<const SymbolIndex*>> by_ns;
    for (const auto& [id, o] : pi.objects) {
      if (o.rolled_back || o.load == nullptr || o.load->reason() == v1::LOAD_VDSO) continue;
      const elf::ElfInfo* info = ctx_.files().Get(o.path);
      if (info == nullptr) continue;
      if (!by_ns.count(o.lmid)) {
        auto& scope = by_ns[o.lmid];
        for (const auto& [oid, other] : pi.objects)
          if ((other.lmid == o.lmid || (other.load && other.load->reason() == v1::LOAD_INTERPRETER)) &&
              !other.rolled_back)
            if (const SymbolIndex* idx = ctx_.files().Symbols(other.path)) scope.push_back(idx);
      }
      // The object loaded, so whatever it references and nothing defines can only be
      // bound lazily (a PLT call): the call will fail.
      std::vector<Missing> missing;
      UndefinedIn(*info, by_ns[o.lmid], &missing);
      if (missing.empty()) continue;
      for (auto& m : missing) Attribute(pi, o, *info, &m);
      auto f = NewFinding(pi, v1::MISSING_SYMBOL, v1::WARNING);
      *f.add_objects() = ctx_.Describe(pi, o);
      f.add_evidence(o.open_seq);
      std::vector<const Missing*> ms;
      for (const auto& m : missing) {
        ms.push_back(&m);
        AddMissing(&f, m, o);
      }
      f.set_message(fmt::format("{} loaded (lazily bound), but no object in namespace {} defines {}, "
                                "which it calls: the first call will fail with 'symbol lookup "
                                "error'.{}",
                                BaseName(o.path), o.lmid, SymbolList(ms),
                                missing[0].provider.empty() ? "" : fmt::format(" {} defines it.", missing[0].provider)));
      *out_->add_findings() = std::move(f);
    }
  }

  Context& ctx_;
  v1::Report* out_;
};

}  // namespace

void FindMissingSymbols(Context& ctx, v1::Report* out) { Pass(ctx, out).Run(); }

}  // namespace ldscope::analysis
