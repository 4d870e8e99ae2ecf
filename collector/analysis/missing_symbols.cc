// Missing symbols: for objects whose dlopen failed, the undefined non-weak symbols and
// the symbol versions that no object in reach defines, each with the file on disk
// that the object's own search path would have bound instead and that defines it. For
// objects that loaded (lazy binding), functions nothing defines: the first call fails.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/env_change.h"
#include "analysis/families.h"
#include "analysis/missing_symbols.h"
#include "analysis/owners.h"
#include "text/escape.h"
#include "render/python_text.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

std::string Normal(const std::string& p) { return NormalPath(p); }

// Whether a file LD_LIBRARY_PATH found lies in the working directory that an empty
// element of it stands for, and in no directory it names.
bool EmptyElementFound(const ProcessIndex& pi, const std::string& file) {
  const std::string llp = EnvOf(*pi.p, "LD_LIBRARY_PATH");
  const std::string dir = file.substr(0, file.rfind('/'));
  if (loader::EmptyElements(llp).empty() || pi.env.cwd.empty() || dir != NormalPath(pi.env.cwd)) return false;
  for (const auto& d : loader::SplitPath(llp))
    if (NormalPath(d.front() == '/' ? d : pi.env.cwd + "/" + d) == dir) return false;
  return true;
}

// Records m in the finding's structured list.
void AddMissing(FindingBuilder* f, const Missing& m, const Obj& o) {
  auto* x = f->proto().add_missing();
  x->set_name(m.name);
  x->set_version(m.version);
  x->set_needed_by(o.path);
  if (m.bound) x->set_bound_to(NormalPath(m.bound->path));
  x->set_provider(m.provider);
  x->set_demangled(m.demangled);
  x->set_cause(m.cause);
  for (const auto& n : m.near) {
    auto* y = x->add_near_misses();
    y->set_path(NormalPath(n.object->path));
    y->set_name(n.name);
    y->set_demangled(n.demangled);
  }
  if (m.cause == v1::CAUSE_NOT_EXPORTED) x->set_local_in(NormalPath(m.holder->path));
  if (m.cause == v1::CAUSE_PYTHON_API) {
    x->set_interpreter(NormalPath(m.holder->path));
    x->set_python_version(m.python_version);
  }
}

// The detail naming the files whose symbols are unknown.
void UnreadableDetail(FindingBuilder* f, const std::vector<std::string>& unreadable) {
  if (unreadable.empty()) return;
  f->Detail("unknown", text::Show("{} could not be read; whether {} define{} these symbols is unknown",
                                  fmt::join(unreadable, ", "), unreadable.size() == 1 ? "it" : "they",
                                  unreadable.size() == 1 ? "s" : ""));
}

// The undefined, non-weak symbols of e that nothing in scope defines.
void UndefinedIn(const elf::ElfInfo& e, const SymbolScope& scope, std::vector<Missing>* out) {
  e.ForEachUndefined([&](const elf::Symbol& s, const elf::SymbolQuery& q) {
    if (s.weak || scope.Defines(q)) return;
    Missing m;
    m.name = s.name;
    m.version = s.version;
    m.needed_name = s.version_file;
    out->push_back(m);
  });
}

class Pass {
 public:
  Pass(Context& ctx, v1::Report* out) : ctx_(ctx), out_(out), owners_(ctx) {}

  void Run() {
    for (const auto& pi : ctx_.processes()) {
      for (const v1::Entry* entry : pi.entries) {
        const v1::Entry& e = *entry;
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
      std::vector<UnmetVersion> unmet;
      if (const Obj* o = StartupVersionFailure(ctx_, pi, &unmet)) {
        StartupVersions(pi, *o, unmet);
        continue;  // nothing ran: nothing was called lazily either
      }
      Lazy(pi);
    }
  }

 private:
  // A start-up object whose version needs a library it was bound to lacks: ld.so stopped
  // the program before main ("version `V' not found", exit status 127), whatever the
  // binding mode. The versions of glibc itself are load_checks.cc's (a newer glibc).
  void StartupVersions(const ProcessIndex& pi, const Obj& o, const std::vector<UnmetVersion>& unmet) {
    const elf::ElfInfo* info = ctx_.File(o.path);
    if (info == nullptr) return;
    std::vector<Missing> missing;
    for (const UnmetVersion& u : unmet) {
      if (IsGlibcVersionNeed(u.file, u.version)) continue;
      Missing m;
      m.version = u.version;
      m.needed_name = u.file;
      m.version_only = true;
      Attribute(pi, o, *info, &m);
      m.bound = u.bound;
      missing.push_back(m);
    }
    if (missing.empty()) return;
    FindingBuilder f(pi, v1::MISSING_SYMBOL, v1::ERROR);
    const v1::Library self = ctx_.Describe(pi, o);
    *f.proto().add_objects() = self;
    f.proto().add_evidence(o.open_seq);
    for (const auto& m : missing) AddMissing(&f, m, o);
    const std::vector<Group> groups = Groups(missing);
    const Missing& m0 = *groups.front().front();
    const std::string base = BaseName(o.path);
    f.Headline(text::Show("{} cannot start: {} needs version {} of {}, which the copy found first ({}) lacks",
                          BaseName(pi.p->exe()), &o == pi.Executable() ? std::string("it") : base, m0.version,
                          m0.needed_name, NormalPath(m0.bound->path)));
    f.Detail("failed", text::Show("{}, loaded {}", self.path(), self.loaded_by()));
    for (const Group& g : groups) Evidence(pi, o, g, &f);
    f.Detail("why", text::Show("ld.so checks version needs once an object's NEEDED libraries are loaded, before "
                               "main and whatever the binding mode; the search for {} had already ended at its "
                               "first match, and a copy that lacks a version is not passed over for a later one",
                               m0.needed_name));
    StartupVersionFixes(o, *info, m0, &f);
    std::move(f).AddTo(out_);
  }

  // Put the copy that has the version first: its directory before the first match's in
  // o's own RUNPATH or RPATH (when both are there), LD_LIBRARY_PATH (which comes before a
  // RUNPATH), or a preload.
  void StartupVersionFixes(const Obj& o, const elf::ElfInfo& info, const Missing& m, FindingBuilder* f) {
    const std::string base = BaseName(o.path);
    if (m.provider.empty()) {
      f->Fix(v1::FIX_INSTALL,
             text::Show("install a {} that offers version {}, or use a build of {} made against the {} "
                        "that is installed",
                        m.needed_name, m.version, base, m.needed_name));
      return;
    }
    const std::string want = DirName(m.provider), first = DirName(m.first_match);
    const bool runpath = m.first_step == v1::STEP_RUNPATH && m.provider_step == v1::STEP_RUNPATH;
    const bool rpath = m.first_step == v1::STEP_RPATH && m.provider_step == v1::STEP_RPATH;
    if (!m.first_match.empty() && (runpath || rpath)) {
      // The elements as written, moved: the one that expands to want before the other.
      std::vector<std::string> elems = loader::SplitSearchPath(runpath ? info.runpath : info.rpath, ":");
      auto expanded = [&](const std::string& e) {
        std::string x = e;
        for (const char* token : {"${ORIGIN}", "$ORIGIN"})
          for (size_t at; (at = x.find(token)) != std::string::npos;)
            x.replace(at, std::string(token).size(), DirName(NormalPath(o.path)));
        return NormalPath(x);
      };
      auto w = std::find_if(elems.begin(), elems.end(), [&](const std::string& e) { return expanded(e) == want; });
      auto fm = std::find_if(elems.begin(), elems.end(), [&](const std::string& e) { return expanded(e) == first; });
      if (w != elems.end() && fm != elems.end() && fm < w) {
        const std::string moved = *w;
        elems.erase(w);
        elems.insert(elems.begin() + (fm - elems.begin()), moved);
        f->Fix(v1::FIX_SET_RUNPATH,
               text::Show("put {} before {} in {}'s {}: patchelf --set-rpath {} {}", want, first, base,
                          runpath ? "RUNPATH" : "RPATH", text::ShellQuote(fmt::format("{}", fmt::join(elems, ":"))),
                          text::ShellQuote(NormalPath(o.path))));
      }
    }
    if (m.first_step == v1::STEP_RUNPATH || m.first_step == v1::STEP_LD_SO_CACHE ||
        m.first_step == v1::STEP_DEFAULT_DIRS)
      f->Fix(v1::FIX_SET_VARIABLE,
             text::Show("or search {} first, before {}'s {}: LD_LIBRARY_PATH={}", want, base,
                        render::StepWord(m.first_step), text::ShellQuote(want)),
             "LD_LIBRARY_PATH", want);
    f->Fix(v1::FIX_PRELOAD_BY_PATH,
           text::Show("or preload the copy that offers version {}: LD_PRELOAD={}", m.version,
                      text::ShellQuote(m.provider)),
           "LD_PRELOAD", m.provider);
  }

  // glibc's lookup scope for the objects of a failed dlopen: the global scope (the
  // executable and what it needed at start-up) and the local scope of the dlopen's
  // root (its dependency closure, following what each NEEDED was bound to), plus ld.so.
  // Objects that other dlopens loaded with RTLD_LOCAL are not in it, however many
  // symbols they define: that is how a preloaded copy can fail to help.
  std::unique_ptr<SymbolScope> Scope(const ProcessIndex& pi, const Obj& root, uint64_t seq,
                                        std::vector<const Obj*>* members,
                                        std::vector<std::string>* unreadable) {
    uint64_t first_dlopen = UINT64_MAX;
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() == v1::LOAD_DLOPEN)
        first_dlopen = std::min(first_dlopen, o.open_seq);
    std::vector<const Obj*> queue;
    auto add = [&](const Obj* o) {
      if (o != nullptr && std::find(queue.begin(), queue.end(), o) == queue.end()) queue.push_back(o);
    };
    // Objects inherited over fork (no load here) are counted in: what the parent had
    // loaded is in reach as far as the trace can tell.
    for (const auto& [id, o] : pi.objects)
      if (o.open_seq < first_dlopen && o.lmid == root.lmid && o.close_seq > seq && !o.path.empty())
        add(&o);
    add(&root);
    for (size_t i = 0; i < queue.size(); ++i) {
      if (queue[i]->load == nullptr) continue;
      for (const auto& n : queue[i]->load->needed()) add(BoundFor(pi, *queue[i], n));
    }
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() == v1::LOAD_INTERPRETER) add(&o);
    std::unique_ptr<SymbolScope> scope = Indexes(queue, unreadable);
    *members = std::move(queue);
    return scope;
  }

  // One lookup scope over objs; the files that could not be read go to unreadable
  // (their symbols are unknown, not absent).
  std::unique_ptr<SymbolScope> Indexes(const std::vector<const Obj*>& objs,
                                       std::vector<std::string>* unreadable) {
    std::vector<const elf::ElfInfo*> files;
    for (const Obj* o : objs) {
      if (o->load != nullptr && o->load->reason() == v1::LOAD_VDSO) continue;
      const elf::ElfInfo* e = ctx_.File(o->path);
      if (e != nullptr) {
        if (std::find(files.begin(), files.end(), e) == files.end()) files.push_back(e);
      }
      else if (std::find(unreadable->begin(), unreadable->end(), NormalPath(o->path)) == unreadable->end())
        unreadable->push_back(NormalPath(o->path));
    }
    return std::make_unique<SymbolScope>(std::move(files));
  }

  // Fills bound/provider for m from o's NEEDED entries: the first file on o's own
  // search path (the whole of it, as the loader model walks it) that defines it. The
  // loader itself stops at the first match, so when that is not the provider, say so.
  void Attribute(const ProcessIndex& pi, const Obj& o, const elf::ElfInfo& info, Missing* m) {
    for (const auto& n : info.needed) {
      if (!m->needed_name.empty() && n != m->needed_name) continue;
      const loader::Result own = loader::Search(n, pi.AsRequester(o, ctx_.files()),
                                                pi.LoaderChain(o, ctx_.files()), pi.env,
                                                /*keep_going=*/true);
      if (own.path.empty()) continue;
      std::vector<loader::Match> found = {{own.path, own.step, ""}};
      found.insert(found.end(), own.later.begin(), own.later.end());
      for (size_t i = 0; i < found.size(); ++i) {
        const elf::ElfInfo* f = ctx_.files().Get(found[i].path);
        const bool defines = f != nullptr && (m->version_only ? f->DefinesVersion(m->version)
                                                              : f->Defines(m->name, m->version));
        if (!defines) continue;
        m->needed_name = n;
        m->bound = BoundFor(pi, o, n);
        m->provider = Normal(found[i].path);
        m->provider_step = found[i].step;
        if (i > 0) {
          m->first_match = Normal(own.path);
          m->first_step = own.step;
        }
        return;
      }
    }
    if (!m->needed_name.empty()) m->bound = BoundFor(pi, o, m->needed_name);
  }

  struct BatchScope {
    std::unique_ptr<SymbolScope> scope;  // null until the first object needs it
    std::vector<const Obj*> members;
    std::vector<std::string> unreadable;
  };

  void FailedObject(const ProcessIndex& pi, const Obj& o, uint64_t seq, const Obj& root,
                    BatchScope* batch) {
    const elf::ElfInfo* info = ctx_.File(o.path);
    if (info == nullptr) return;
    // A NEEDED found nowhere fails the dlopen before any symbol is looked up
    // (missing_library.cc).
    for (const auto& n : info->needed)
      if (BoundFor(pi, o, n) == nullptr) return;
    if (batch->scope == nullptr) batch->scope = Scope(pi, root, seq, &batch->members, &batch->unreadable);
    const SymbolScope* reach = batch->scope.get();
    std::vector<Missing> missing;
    // Version needs are checked first by glibc (_dl_check_map_versions).
    for (const auto& vn : info->verneeds) {
      const Obj* bound = BoundFor(pi, o, vn.file);
      const elf::ElfInfo* b = bound ? ctx_.File(bound->path) : nullptr;
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
      const elf::ElfInfo* idx = ctx_.File(other->path);
      if (idx == nullptr) continue;
      for (auto& m : missing)
        if (m.out_of_scope == nullptr && !m.version_only && idx->Defines(m.name, m.version))
          m.out_of_scope = other;
    }
    for (auto& m : missing) Attribute(pi, o, *info, &m);
    FindCauses(ctx_, pi, o, batch->members, &missing, &causes_);
    Report(pi, o, missing, batch->unreadable);
  }

  // Groups by (bound object, provider, cause, the cause's object); the explanation
  // first: a group with a provider, else one whose cause is known.
  static std::vector<Group> Groups(const std::vector<Missing>& missing) {
    std::vector<Group> groups;
    for (const auto& m : missing) {
      auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
        const Missing& y = *x.front();
        return y.bound == m.bound && y.provider == m.provider && y.cause == m.cause && y.holder == m.holder;
      });
      if (g == groups.end()) groups.push_back({&m});
      else g->push_back(&m);
    }
    auto rank = [](const Group& g) {
      return !g.front()->provider.empty() ? 0 : g.front()->cause != v1::MISSING_CAUSE_UNSPECIFIED ? 1 : 2;
    };
    std::stable_sort(groups.begin(), groups.end(), [&](const Group& a, const Group& b) { return rank(a) < rank(b); });
    return groups;
  }

  static bool Reused(const Obj& o, const Obj* bound) {
    return bound != nullptr && bound->open_seq < o.open_seq && bound->requester != o.id;
  }

  // The objects one group rests on: the copy its NEEDED name was bound to, the file that
  // defines it.
  void GroupObjects(const ProcessIndex& pi, const Group& ms, FindingBuilder* f) {
    const Missing& m0 = *ms.front();
    if (m0.bound != nullptr) {
      const v1::Library b = ctx_.Describe(pi, *m0.bound);
      *f->proto().add_objects() = b;
      f->proto().add_evidence(b.seq());
    }
    if (!m0.provider.empty()) *f->proto().add_objects() = ProviderLibrary(m0);
  }

  v1::Library ProviderLibrary(const Missing& m) {
    v1::Library p;
    p.set_path(m.provider);
    p.set_version(ctx_.VersionOf(m.provider, m.needed_name));
    p.set_found_by(render::StepWord(m.provider_step));
    return p;
  }

  // "ncclCommRegister is not in the libnccl.so.2 it was bound to"
  static std::string Headline(const Obj& o, const Group& ms) {
    const Missing& m0 = *ms.front();
    std::string what;
    if (m0.version_only)
      what = fmt::format("{} lacks version {}", m0.needed_name, m0.version);
    else if (m0.bound != nullptr)
      what = fmt::format("{} {} not in the {} it was bound to", SymbolList(ms), ms.size() == 1 ? "is" : "are",
                         m0.needed_name);
    else
      what = fmt::format("nothing in its scope defines {}", SymbolList(ms));
    return fmt::format("{} failed to load: {}", BaseName(o.path), what);
  }

  // The evidence for one group, as labelled lines.
  void Evidence(const ProcessIndex& pi, const Obj& o, const Group& ms, FindingBuilder* f) {
    const Missing& m0 = *ms.front();
    const std::string base = BaseName(o.path);
    const char* pronoun = ms.size() == 1 ? "it" : "them";
    f->Detail("needs", text::Show("{}{}", SymbolList(ms),
                                  m0.needed_name.empty() || m0.version_only
                                      ? ""
                                      : fmt::format(" (from its NEEDED {})", m0.needed_name)));
    if (m0.bound != nullptr) {
      const v1::Library b = ctx_.Describe(pi, *m0.bound);
      f->Detail("bound to",
                text::Show("{}, which does not {} {}", Label(b), m0.version_only ? "offer" : "define", pronoun));
      if (Reused(o, m0.bound)) {
        f->Detail("loaded first", text::Show("{}{}", b.loaded_by(), LoadedAt(pi, b, ", ")));
        f->Detail("why", text::Show("glibc reuses a loaded object whose SONAME matches the "
                                    "DT_NEEDED {} and does not search: {}'s own search was never "
                                    "done",
                                    m0.needed_name, base));
      } else if (!b.found_by().empty()) {
        f->Detail("found by", text::ShowBytes(b.found_by()));
      }
    }
    if (!m0.first_match.empty() && (m0.bound == nullptr || NormalPath(m0.bound->path) != m0.first_match))
      f->Detail("first match",
                text::Show("{} ({}), which lacks {}", m0.first_match, render::StepWord(m0.first_step), pronoun));
    if (!m0.provider.empty()) {
      const v1::Library p = ProviderLibrary(m0);
      const std::string verb = m0.version_only ? "offers" : "defines";
      if (Reused(o, m0.bound))
        f->Detail("own search finds", text::Show("{} via {}, which {} {}", Label(p), p.found_by(), verb, pronoun));
      else if (!m0.first_match.empty())
        f->Detail("later on the path",
                  text::Show("{} via {}, which {} {}: the loader takes the first match ({}) and never reaches it",
                             Label(p), p.found_by(), verb, pronoun, render::StepWord(m0.first_step)));
      else
        f->Detail("defined by", text::Show("{} ({})", Label(p), p.found_by()));
    } else {
      f->Detail("defined by", text::Show("no file on {}'s search path", base));
    }
    if (m0.out_of_scope != nullptr)
      f->Detail("also loaded",
                text::Show("{} defines {}, but was loaded {}, in a local scope "
                           "(RTLD_LOCAL) {} cannot see",
                           NormalPath(m0.out_of_scope->path), pronoun, ctx_.HowLoaded(pi, *m0.out_of_scope), base));
  }

  void Report(const ProcessIndex& pi, const Obj& o, const std::vector<Missing>& missing,
              const std::vector<std::string>& unreadable) {
    FindingBuilder f(pi, v1::MISSING_SYMBOL, v1::ERROR);
    const v1::Library self = ctx_.Describe(pi, o);
    *f.proto().add_objects() = self;
    f.proto().add_evidence(o.open_seq);
    for (const auto& m : missing) AddMissing(&f, m, o);
    const std::vector<Group> groups = Groups(missing);
    f.Detail("failed", text::Show("{}, loaded {}", self.path(), self.loaded_by()));
    if (groups.front().front()->cause != v1::MISSING_CAUSE_UNSPECIFIED) {
      CausedReport(pi, o, groups, unreadable, &f);
      std::move(f).AddTo(out_);
      return;
    }
    f.Headline(text::ShowBytes(Headline(o, groups.front())));
    for (const Group& g : groups) {
      GroupObjects(pi, g, &f);
      Evidence(pi, o, g, &f);
    }
    UnreadableDetail(&f, unreadable);
    OwnerDetail(o, &f);
    SymbolFixes(pi, o, groups.front(), &f);
    std::move(f).AddTo(out_);
  }

  // A failure whose explanation has a known cause (missing_causes.cc): its words.
  void CausedReport(const ProcessIndex& pi, const Obj& o, const std::vector<Group>& groups,
                    const std::vector<std::string>& unreadable, FindingBuilder* f) {
    f->Headline(text::Show("{} failed to load: {}", BaseName(o.path), CauseHeadline(ctx_, groups.front(), owners_)));
    for (const Group& g : groups) {
      if (g.front()->cause != v1::MISSING_CAUSE_UNSPECIFIED)
        CauseDetails(ctx_, pi, o, g, owners_, f);
      else
        Evidence(pi, o, g, f);
    }
    UnreadableDetail(f, unreadable);
    OwnerDetail(o, f);
    CauseFixes(ctx_, pi, o, groups.front(), owners_, f);
  }

  // The package that installed the object, as the trace recorded it.
  void OwnerDetail(const Obj& o, FindingBuilder* f) {
    f->Detail("owner", text::Show("{}: {}", NormalPath(o.path), OwnerText(ctx_.OwnerOf(o.path))));
  }

  // What to do, concrete for the first group's case.
  void SymbolFixes(const ProcessIndex& pi, const Obj& o, const Group& ms, FindingBuilder* f) {
    const Missing& m0 = *ms.front();
    const std::string base = BaseName(o.path);
    const std::string what = m0.version_only ? "version " + m0.version : SymbolList(ms);
    const bool python = o.load != nullptr && o.load->has_python();
    if (m0.provider.empty()) {
      f->Fix(m0.version_only ? v1::FIX_PIN_VERSION : v1::FIX_INSTALL,
             text::Show("install a {} that {} {} (a newer release of the package that provides "
                        "it), or use a build of {} made against the {} that is installed",
                        m0.needed_name.empty() ? "library" : m0.needed_name, m0.version_only ? "offers" : "defines",
                        what, base, m0.needed_name.empty() ? "library" : m0.needed_name));
      return;
    }
    if (m0.out_of_scope != nullptr && NormalPath(m0.out_of_scope->path) == m0.provider) {
      f->Fix(v1::FIX_LOAD_RTLD_GLOBAL, text::Show("load {} with RTLD_GLOBAL where it is loaded now ({}){}", m0.provider,
                                                  ctx_.HowLoaded(pi, *m0.out_of_scope),
                                                  python ? ": ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)" : ""));
    }
    if (Reused(o, m0.bound)) {
      AddSwapFix(pi, o, *m0.bound, f);
      f->Fix(v1::FIX_PRELOAD_BY_PATH,
             text::Show("load the copy {}'s {} names before anything loads {}: {}LD_PRELOAD={}", base,
                        render::StepWord(m0.provider_step), m0.needed_name,
                        python ? text::Show("ctypes.CDLL({}, mode=ctypes.RTLD_GLOBAL) first, or ",
                                            text::PythonString(m0.provider))
                               : "",
                        text::ShellQuote(m0.provider)),
             "LD_PRELOAD", m0.provider);
      return;
    }
    if (m0.first_step == v1::STEP_LD_LIBRARY_PATH && !m0.first_match.empty() && EmptyElementFound(pi, m0.first_match)) {
      // The directory is no element of LD_LIBRARY_PATH: an empty one, the current
      // directory (search_files.cc's empty-path-element finding tells the hazard).
      const std::string llp = EnvOf(*pi.p, "LD_LIBRARY_PATH");
      const std::string kept = fmt::format("{}", fmt::join(loader::SplitPath(llp), ":"));
      f->Fix(v1::FIX_DROP_FROM_LD_LIBRARY_PATH,
             text::Show("drop the empty element from LD_LIBRARY_PATH: it is the current directory, whose {} lacks "
                        "{}: LD_LIBRARY_PATH={}",
                        m0.needed_name, what, text::ShellQuote(kept)),
             "LD_LIBRARY_PATH", kept);
    } else if (m0.first_step == v1::STEP_LD_LIBRARY_PATH && !m0.first_match.empty()) {
      const std::string dir = m0.first_match.substr(0, m0.first_match.rfind('/'));
      std::string text = fmt::format(
          "drop {} from LD_LIBRARY_PATH (its {} lacks {}){}", dir, m0.needed_name, what,
          m0.provider_step == v1::STEP_LD_LIBRARY_PATH
              ? fmt::format(", or put {} before it", m0.provider.substr(0, m0.provider.rfind('/')))
              : fmt::format("; {}'s {} then finds {}", base, render::StepWord(m0.provider_step), m0.provider));
      DropFromLdLibraryPathFix(pi, dir, std::move(text), f);
    }
    if (m0.bound != nullptr && NormalPath(m0.bound->path) != m0.provider)
      f->Fix(v1::FIX_PRELOAD_BY_PATH,
             text::Show("or preload the copy that {}: LD_PRELOAD={}",
                        m0.version_only ? "offers " + what : "defines " + what, text::ShellQuote(m0.provider)),
             "LD_PRELOAD", m0.provider);
  }

  // Objects that loaded but call functions nothing in their namespace defines.
  struct NamespaceScope {
    std::unique_ptr<SymbolScope> scope;
    std::vector<const Obj*> members;
    std::vector<std::string> unreadable;
    // Files whose undefined symbols the scope all defines (a churn loads a few files a
    // million times: each is looked up symbol by symbol once).
    std::unordered_set<const elf::ElfInfo*> complete;
  };

  void Lazy(const ProcessIndex& pi) {
    if (StartupFailed(pi)) return;
    std::map<int64_t, NamespaceScope> by_ns;
    for (const auto& [id, o] : pi.objects) {
      if (o.rolled_back || o.load == nullptr || o.load->reason() == v1::LOAD_VDSO) continue;
      const elf::ElfInfo* info = ctx_.File(o.path);
      if (info == nullptr) continue;
      if (!by_ns.count(o.lmid)) {
        std::vector<const Obj*> members;
        for (const auto& [oid, other] : pi.objects)
          if ((other.lmid == o.lmid || (other.load && other.load->reason() == v1::LOAD_INTERPRETER)) &&
              !other.rolled_back && !other.path.empty())
            members.push_back(&other);
        auto& ns = by_ns[o.lmid];
        ns.scope = Indexes(members, &ns.unreadable);
        ns.members = std::move(members);
      }
      // The object loaded, so whatever it references and nothing defines can only be
      // bound lazily (a PLT call): the call will fail.
      NamespaceScope& ns = by_ns[o.lmid];
      if (ns.complete.count(info) != 0) continue;
      std::vector<Missing> missing;
      UndefinedIn(*info, *ns.scope, &missing);
      if (missing.empty()) {
        ns.complete.insert(info);
        continue;
      }
      std::vector<const Missing*> ms;
      for (const auto& m : missing) ms.push_back(&m);
      // Files not read may define them: then nothing is known, and the report says so.
      const auto& unreadable = ns.unreadable;
      if (!unreadable.empty()) {
        out_->add_notes(text::Show("process {}: whether {} calls functions that nothing defines ({}) is unknown: {} "
                                   "could not be read",
                                   pi.p->pid(), NormalPath(o.path), SymbolList(ms), fmt::join(unreadable, ", "))
                            .str());
        continue;
      }
      for (auto& m : missing) Attribute(pi, o, *info, &m);
      FindCauses(ctx_, pi, o, ns.members, &missing, &causes_);
      LazyFinding(pi, o, missing, ms);
    }
  }

  void LazyFinding(const ProcessIndex& pi, const Obj& o, const std::vector<Missing>& missing,
                   const std::vector<const Missing*>& ms) {
    FindingBuilder f(pi, v1::MISSING_SYMBOL, v1::WARNING);
    const v1::Library self = ctx_.Describe(pi, o);
    *f.proto().add_objects() = self;
    f.proto().add_evidence(o.open_seq);
    for (const auto& m : missing) AddMissing(&f, m, o);
    const std::string base = BaseName(o.path);
    const std::string& provider = missing[0].provider;
    f.Headline(text::Show("{} calls {}, which no object in namespace {} defines", base, SymbolList(ms), o.lmid));
    f.Detail("loaded", text::Show("{}, {} (lazy binding: only the first call fails)", self.path(), self.loaded_by()));
    f.Detail("defined by", text::ShowBytes(provider.empty() ? fmt::format("no file on {}'s search path", base)
                                                            : fmt::format("{} ({}), not loaded", provider,
                                                                          render::StepWord(missing[0].provider_step))));
    OwnerDetail(o, &f);
    // Symbols whose cause is known: the first such cause says what to do.
    Group caused;
    for (const Missing* m : ms)
      if (m->cause != v1::MISSING_CAUSE_UNSPECIFIED &&
          (caused.empty() || (m->cause == caused[0]->cause && m->holder == caused[0]->holder)))
        caused.push_back(m);
    if (!caused.empty()) {
      CauseDetails(ctx_, pi, o, caused, owners_, &f);
      CauseFixes(ctx_, pi, o, caused, owners_, &f);
      std::move(f).AddTo(out_);
      return;
    }
    if (!provider.empty())
      f.Fix(v1::FIX_LOAD_RTLD_GLOBAL, text::Show("load {} with RTLD_GLOBAL before {} (or LD_PRELOAD={})", provider,
                                                 base, text::ShellQuote(provider)));
    f.Fix(v1::FIX_ADD_NEEDED,
          text::Show("link {} against the library that defines {} (a DT_NEEDED entry)", base, SymbolList(ms)));
    std::move(f).AddTo(out_);
  }

  Context& ctx_;
  v1::Report* out_;
  PipOwners owners_;  // the pip distributions of the files findings name, as the trace recorded them
  CauseMemo causes_;
};

}  // namespace

std::string SymbolList(const Group& ms) {
  std::vector<std::string> names;
  for (const Missing* m : ms)
    names.push_back(m->version_only      ? fmt::format("version '{}' of {}", m->version, m->needed_name)
                    : m->version.empty() ? m->name
                                         : fmt::format("{}@{}", m->name, m->version));
  if (names.size() == 1) return names[0];
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 4);
  for (size_t i = 0; i < shown; ++i)
    out += (i == 0 ? "" : i + 1 == shown && shown == names.size() ? " and " : ", ") + names[i];
  if (names.size() > shown) out += fmt::format(" and {} more", names.size() - shown);
  return out;
}

void FindMissingSymbols(Context& ctx, v1::Report* out) { Pass(ctx, out).Run(); }

}  // namespace ldscope::analysis
