// Failed dlopens explained (docs/LOADER.md sections 2, 3 and 5). Four shapes:
// - rejected: the dlopen found the object, but a library it needs (directly or further
//   down its NEEDED chain) lacks a symbol version or symbol it requires, and no other
//   file on the search path offers it: the installed dependency is too old (warning;
//   a program probing for a plugin goes on without it);
// - not found: a name no directory on the caller's search path holds (info: packages
//   probe for optional plugins on every start);
// - RUNPATH not inherited: the same, for a bare name that a RUNPATH directory of an
//   object that loaded the caller holds (warning: dlopen uses only the caller's own
//   RUNPATH; an RPATH is inherited, a RUNPATH is not);
// - out of scope: an undefined symbol that an object already loaded defines, but that
//   object is not in the failing object's lookup scope (error).
// Where a fact was not read (a file, a C caller's dlopen mode), the finding says
// "unknown" instead of concluding from its absence. Rejected and out-of-scope findings
// list the symbols they explain in `missing`, so that the driver drops the
// missing-symbol finding telling the same failure.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "render/python_text.h"
#include "text/escape.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

constexpr uint32_t kRtldGlobal = 0x100;

std::string Join(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

// "libfabric.so.1 (found via RUNPATH)"-style: the path, and the step that found it.
std::string PathFound(const Obj& o) {
  const std::string step = o.load != nullptr ? render::FoundByWord(*o.load) : "";
  if (step.empty()) return NormalPath(o.path);
  if (render::FoundBy(*o.load) == v1::STEP_AS_GIVEN) return fmt::format("{} (opened by its path)", NormalPath(o.path));
  return fmt::format("{} (found via {})", NormalPath(o.path), step);
}

// One requirement of an object in a failed dlopen that the library bound to its NEEDED
// name does not meet.
struct Lack {
  const Obj* object = nullptr;  // the object that requires it
  const Obj* bound = nullptr;   // what its NEEDED name was bound to
  std::string needed_name;
  std::string version;          // the version node (or the symbol's version)
  std::string symbol;           // "" for a version node
};

std::string LackText(const Lack& l) {
  return l.symbol.empty() ? fmt::format("version {}", l.version)
                          : l.version.empty() ? l.symbol : fmt::format("{}@{}", l.symbol, l.version);
}

class Pass {
 public:
  Pass(Context& ctx, v1::Report* out) : ctx_(ctx), out_(out) {}

  void Run() {
    for (const auto& pi : ctx_.processes()) {
      const int first = out_->findings_size();
      for (const v1::Entry* e : pi.entries) {
        if (e->has_failed_dlopen()) FailedDlopen(pi, *e);
        if (e->has_search()) Search(pi, *e);
      }
      FoldAbsent(first);
    }
  }

 private:
  // ---- A dlopen that mapped objects and rolled them back ----

  void FailedDlopen(const ProcessIndex& pi, const v1::Entry& e) {
    std::vector<const Obj*> batch;
    for (const auto& r : e.failed_dlopen().rolled_back()) {
      auto it = pi.objects.find(r.id());
      if (it != pi.objects.end() && it->second.load != nullptr) batch.push_back(&it->second);
    }
    if (batch.empty()) return;
    std::sort(batch.begin(), batch.end(), LoadedBefore);
    const Obj& root = *batch.front();
    if (root.load->reason() != v1::LOAD_DLOPEN) return;
    // A NEEDED found nowhere fails the dlopen first (missing_library.cc).
    for (const Obj* o : batch)
      for (const auto& n : o->load->needed())
        if (BoundFor(pi, *o, n) == nullptr) return;
    // Versions are checked for the whole batch before any symbol is looked up
    // (_dl_check_map_versions in dl-version.c, called from dl_open_worker).
    std::vector<Lack> lacks;
    bool unknown = false;
    std::vector<const elf::ElfInfo*> scope;  // the dlopen's lookup scope, as files (those read)
    for (const Obj* s : Scope(pi, root, e.seq()))
      if (const elf::ElfInfo* info = ctx_.File(s->path)) scope.push_back(info);
    for (const Obj* o : batch) Lacking(pi, *o, scope, &lacks, &unknown);
    if (unknown) return;
    if (!lacks.empty()) {
      Rejected(pi, e, root, batch, lacks);
      return;
    }
    for (const Obj* o : batch) OutOfScope(pi, e, root, *o);
  }

  // The versions (and versioned symbols) o requires from the libraries its NEEDED names
  // were bound to and that those do not offer.
  void Lacking(const ProcessIndex& pi, const Obj& o, const std::vector<const elf::ElfInfo*>& scope,
               std::vector<Lack>* out, bool* unknown) {
    const elf::ElfInfo* info = ctx_.File(o.path);
    if (info == nullptr) {
      *unknown = true;
      return;
    }
    for (const auto& vn : info->verneeds) {
      const Obj* b = BoundFor(pi, o, vn.file);
      if (b == nullptr) continue;
      const elf::ElfInfo* s = ctx_.File(b->path);
      if (s == nullptr) {
        *unknown = true;
        return;
      }
      for (const auto& v : vn.versions)
        if (!s->DefinesVersion(v)) out->push_back({&o, b, vn.file, v, ""});
    }
    for (const auto& sym : info->Symbols(elf::ElfInfo::Which::kUndefined)) {
      if (sym.defined || sym.weak || sym.version_file.empty()) continue;
      const Obj* b = BoundFor(pi, o, std::string(sym.version_file));
      const elf::ElfInfo* s = b != nullptr ? ctx_.File(b->path) : nullptr;
      if (s == nullptr) continue;
      // Under a missing version node too: glibc would name the node, but these are the
      // symbols it stands for. A symbol is looked up in the whole scope, by version, not in
      // the file the version names (glibc 2.34's libpthread.so.0 keeps GLIBC_2.2.5 while
      // libc.so.6 defines pthread_join@GLIBC_2.2.5): lacking only where nothing defines it.
      if (s->Defines(sym.name, sym.version) || AnyDefines(scope, sym.name, sym.version)) continue;
      out->push_back({&o, b, std::string(sym.version_file), std::string(sym.version), std::string(sym.name)});
    }
  }

  // Does any file on o's own search path (the whole of it) other than the one bound
  // offer what l lacks? Then the failure is a search-order story that the shadowing,
  // fall-through and missing-symbol passes tell with their own fixes.
  bool OfferedElsewhere(const ProcessIndex& pi, const Lack& l) {
    const loader::Result r = loader::Search(l.needed_name, pi.AsRequester(*l.object, ctx_.files()),
                                            pi.LoaderChain(*l.object, ctx_.files()), pi.env,
                                            /*keep_going=*/true);
    std::vector<std::string> files;
    if (!r.path.empty()) files.push_back(r.path);
    for (const auto& m : r.later) files.push_back(m.path);
    for (const auto& f : files) {
      if (ctx_.SameFile(f, l.bound->path)) continue;
      const elf::ElfInfo* s = ctx_.files().Get(f);
      if (s == nullptr) return true;  // unknown: leave it to the passes that say so
      if (l.symbol.empty() ? s->DefinesVersion(l.version) : s->Defines(l.symbol, l.version)) return true;
    }
    return false;
  }

  // "dlprobe → dlopen libnccl-net.so → NEEDED libfabric.so.1": how the dlopen reached
  // the object that requires what is missing.
  std::string Chain(const ProcessIndex& pi, const v1::Entry& e, const Obj& root, const Lack& l) {
    std::vector<const Obj*> path = {l.object};
    for (const Obj* o = l.object; o != &root && path.size() < 16;) {
      auto it = pi.objects.find(o->requester);
      if (it == pi.objects.end()) break;
      o = &it->second;
      path.push_back(o);
    }
    std::reverse(path.begin(), path.end());
    auto caller = pi.objects.find(root.requester);
    std::string out = caller != pi.objects.end() ? BaseName(caller->second.path) : std::string("(unknown caller)");
    out += fmt::format(" → dlopen {}", e.failed_dlopen().requested_name().empty() ? BaseName(root.path)
                                                                                    : e.failed_dlopen().requested_name());
    for (size_t i = 1; i < path.size(); ++i) out += fmt::format(" → NEEDED {}", path[i]->load->requested_name());
    out += fmt::format(" → NEEDED {} → {}, which lacks {}", l.needed_name, NormalPath(l.bound->path), LackText(l));
    return out;
  }

  void Rejected(const ProcessIndex& pi, const v1::Entry& e, const Obj& root,
                const std::vector<const Obj*>& batch, const std::vector<Lack>& lacks) {
    for (const Lack& l : lacks)
      if (IsGlibcVersionNeed(l.needed_name, l.version)) return;  // built for a newer glibc: load_checks.cc
    for (const Lack& l : lacks)
      if (OfferedElsewhere(pi, l)) return;
    // A NEEDED that fell through from the requester's own RPATH/RUNPATH to another
    // installation that lacks it: the fall-through error tells that, with its fixes
    // (fallthrough.cc, which leaves out system runtimes in system directories).
    for (const FallThrough& ft : FallThroughs(ctx_, pi))
      for (const Lack& l : lacks)
        if (ft.object == l.bound && ft.requester == l.object &&
            !(IsSystemRuntime(l.needed_name) && InSystemDir(l.bound->path)))
          return;
    // Version nodes first: glibc stops there ("version `V' not found").
    std::vector<Lack> shown;
    for (const Lack& l : lacks)
      if (l.symbol.empty()) shown.push_back(l);
    if (shown.empty()) shown = lacks;
    const Lack& l0 = shown.front();
    FindingBuilder f(pi, v1::DLOPEN_REJECTED, v1::WARNING);
    *f.proto().add_objects() = ctx_.Describe(pi, root);
    if (l0.object != &root) *f.proto().add_objects() = ctx_.Describe(pi, *l0.object);
    *f.proto().add_objects() = ctx_.Describe(pi, *l0.bound);
    f.proto().add_evidence(root.open_seq);
    f.proto().add_evidence(e.seq());
    for (const Lack& l : lacks) {
      auto* m = f.proto().add_missing();
      m->set_name(l.symbol);
      m->set_version(l.version);
      m->set_needed_by(l.object->path);
      m->set_bound_to(NormalPath(l.bound->path));
    }
    std::vector<std::string> what;
    for (const Lack& l : shown)
      if (l.needed_name == l0.needed_name && what.size() < 4) what.push_back(LackText(l));
    f.Headline(text::Show("plugin {} rejected: its {} lacks {}", BaseName(root.path), l0.needed_name, Join(what)));
    f.Detail("chain", text::ShowBytes(Chain(pi, e, root, l0)));
    f.Detail("plugin", text::Show("{}, loaded {}", PathFound(root), ctx_.HowLoaded(pi, root)));
    if (l0.object != &root)
      f.Detail("requires",
               text::Show("{} (needs {} from {})", NormalPath(l0.object->path), Join(what), l0.needed_name));
    f.Detail("bound to", text::Show("{}, loaded {}", NormalPath(l0.bound->path), ctx_.HowLoaded(pi, *l0.bound)));
    if (const elf::ElfInfo* b = ctx_.files().Get(l0.bound->path)) {
      std::vector<std::string> offers;
      for (const auto& v : b->verdefs)
        if (v != b->soname && v != BaseName(l0.bound->path)) offers.push_back(v);
      f.Detail("offers", text::ShowBytes(offers.empty() ? std::string("no symbol versions")
                                                        : fmt::format("versions {}", Join(offers))));
    }
    f.Detail("elsewhere",
             text::Show("no other file on {}'s search path offers {}", BaseName(l0.object->path), LackText(l0)));
    f.Detail("effect", text::Show("the dlopen failed and its {} object{} {} unloaded again: "
                                  "the plugin is not in use",
                                  batch.size(), batch.size() == 1 ? "" : "s", batch.size() == 1 ? "was" : "were"));
    f.Fix(v1::FIX_INSTALL, text::Show("upgrade {} ({}) to a release that offers {}", l0.needed_name,
                                      NormalPath(l0.bound->path), LackText(l0)));
    f.Fix(v1::FIX_INSTALL, text::Show("or install a build of {} made against the {} that is installed",
                                      BaseName(l0.object->path), l0.needed_name));
    f.Fix(v1::FIX_REMOVE, text::Show("or, if the program is meant to run without the plugin, remove {} "
                                     "so that nothing tries to load it",
                                     NormalPath(root.path)));
    std::move(f).AddTo(out_);
  }

  // glibc's lookup scope for a failing object of the dlopen whose root is root
  // (docs/LOADER.md section 5): the global scope (objects of start-up, LD_PRELOAD, ld.so,
  // and dlopens known to be RTLD_GLOBAL) and the root's dependency closure. Objects
  // loaded by other dlopens are outside it unless their mode is known to be global.
  std::vector<const Obj*> Scope(const ProcessIndex& pi, const Obj& root, uint64_t seq) {
    uint64_t first_dlopen = UINT64_MAX;
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() == v1::LOAD_DLOPEN) first_dlopen = std::min(first_dlopen, o.open_seq);
    std::vector<const Obj*> scope;
    auto add = [&](const Obj* o) {
      if (o != nullptr && std::find(scope.begin(), scope.end(), o) == scope.end()) scope.push_back(o);
    };
    for (const auto& [id, o] : pi.objects) {
      if (o.lmid != root.lmid || o.close_seq <= seq || o.path.empty() || o.rolled_back) continue;
      const bool global = o.load != nullptr && o.load->has_dlopen_mode() && (o.load->dlopen_mode() & kRtldGlobal);
      if (o.open_seq < first_dlopen || global) add(&o);
    }
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() == v1::LOAD_INTERPRETER) add(&o);
    add(&root);
    for (size_t i = 0; i < scope.size(); ++i) {
      if (scope[i]->load == nullptr) continue;
      for (const auto& n : scope[i]->load->needed()) add(BoundFor(pi, *scope[i], n));
    }
    return scope;
  }

  // A symbol o leaves undefined and the object outside its lookup scope that defines it.
  struct Found {
    elf::Symbol sym;  // views into the ElfInfo, which Files keeps
    const Obj* provider;
  };

  // The object files of scope (the vDSO left out); false when one is unreadable.
  bool ScopeIndexes(const std::vector<const Obj*>& scope, std::vector<const elf::ElfInfo*>* idx) {
    for (const Obj* s : scope) {
      if (s->load != nullptr && s->load->reason() == v1::LOAD_VDSO) continue;
      const elf::ElfInfo* x = ctx_.File(s->path);
      if (x == nullptr) return false;  // what it defines is unknown: so is what is missing
      idx->push_back(x);
    }
    return true;
  }

  // An object alive in o's namespace before the failure, outside scope, that defines s.
  const Obj* ProviderOutside(const ProcessIndex& pi, const v1::Entry& e, const Obj& o,
                             const std::vector<const Obj*>& scope, const elf::Symbol& s) {
    for (const Obj* a : pi.AliveAt(o.lmid, e.seq() > 0 ? e.seq() - 1 : 0)) {
      if (a->rolled_back || a->path.empty() || std::find(scope.begin(), scope.end(), a) != scope.end()) continue;
      const elf::ElfInfo* x = ctx_.File(a->path);
      if (x != nullptr && x->Defines(s.name, s.version)) return a;
    }
    return nullptr;
  }

  // The symbols o needs that nothing in its lookup scope defines, each with an object
  // outside the scope that does. Empty when that is not the whole story (a symbol
  // unknown, missing everywhere, or one for the missing-symbol pass).
  std::vector<Found> FindOutOfScope(const ProcessIndex& pi, const v1::Entry& e, const Obj& o,
                                    const elf::ElfInfo& info, const std::vector<const Obj*>& scope) {
    std::vector<const elf::ElfInfo*> idx;
    if (!ScopeIndexes(scope, &idx)) return {};
    std::vector<Found> found;
    for (const auto& s : info.Symbols(elf::ElfInfo::Which::kUndefined)) {
      if (s.weak || AnyDefines(idx, s.name, s.version)) continue;
      // A symbol that one of o's own NEEDED names should provide (a versioned reference
      // names it; or a file o's own search path finds for a NEEDED defines it) is a
      // story of what that name was bound to: the missing-symbol pass tells it.
      if (!s.version_file.empty() || OwnNeededDefines(pi, o, info, s)) return {};
      const Obj* provider = ProviderOutside(pi, e, o, scope, s);
      // A symbol no loaded object defines: the missing-symbol finding tells that story,
      // and this one would tell half of it.
      if (provider == nullptr) return {};
      found.push_back({s, provider});
    }
    return found;
  }

  void OutOfScope(const ProcessIndex& pi, const v1::Entry& e, const Obj& root, const Obj& o) {
    const elf::ElfInfo* info = ctx_.File(o.path);
    if (info == nullptr) return;
    const std::vector<Found> found = FindOutOfScope(pi, e, o, *info, Scope(pi, root, e.seq()));
    if (found.empty()) return;
    const Obj& p = *found.front().provider;
    std::vector<std::string> names;
    for (const auto& x : found)
      if (x.provider == &p) names.push_back(x.sym.version.empty() ? std::string(x.sym.name) : fmt::format("{}@{}", x.sym.name, x.sym.version));
    const std::string base = BaseName(o.path), pbase = BaseName(p.path);
    FindingBuilder f(pi, v1::DLOPEN_OUT_OF_SCOPE, v1::ERROR);
    *f.proto().add_objects() = ctx_.Describe(pi, o);
    *f.proto().add_objects() = ctx_.Describe(pi, p);
    f.proto().add_evidence(o.open_seq);
    f.proto().add_evidence(p.open_seq);
    for (const auto& x : found) {
      auto* m = f.proto().add_missing();
      m->set_name(std::string(x.sym.name));
      m->set_version(std::string(x.sym.version));
      m->set_needed_by(o.path);
      m->set_provider(NormalPath(x.provider->path));
    }
    const std::string shown = names.size() <= 3 ? Join(names)
                                                : fmt::format("{}, {} and {} more", names[0], names[1], names.size() - 2);
    f.Headline(text::Show("{} failed to load: {} is in {}, outside its lookup scope", base,
                          names.size() == 1 ? names[0] : fmt::format("{} symbols", names.size()), pbase));
    f.Detail("failed", text::Show("{}, loaded {}", NormalPath(o.path), ctx_.HowLoaded(pi, o)));
    f.Detail("needs", text::Show("{} (undefined in {}; none of its NEEDED libraries defines {})", shown, base,
                                 names.size() == 1 ? "it" : "them"));
    f.Detail("defined by", text::Show("{}, loaded {}, +{:.1f} ms", NormalPath(p.path), ctx_.HowLoaded(pi, p), p.at_ms));
    ScopeDetails(pi, e, root, p, names.size(), &f);
    OutOfScopeFixes(pi, o, p, &f);
    std::move(f).AddTo(out_);
  }

  // The provider's dlopen mode, when known, and the lookup scope's members.
  void ScopeDetails(const ProcessIndex& pi, const v1::Entry& e, const Obj& root, const Obj& p, size_t names,
                    FindingBuilder* f) {
    const Obj* proot = DlopenRoot(pi, p);
    if (proot != nullptr && proot->load->has_dlopen_mode())
      f->Detail("mode", text::Show("{} (read by ldscope's Python hook): its symbols stay private to "
                                   "that dlopen's own objects",
                                   (proot->load->dlopen_mode() & kRtldGlobal) ? "RTLD_GLOBAL" : "RTLD_LOCAL"));
    else
      f->Detail("mode", text::Show("unknown (the trace has the mode of Python's ctypes calls and imports "
                                   "only); {} is in the global scope only if that dlopen was RTLD_GLOBAL, "
                                   "and then this lookup would have found {}",
                                   BaseName(p.path), names == 1 ? "it" : "them"));
    std::vector<std::string> members;
    for (const Obj* s : Scope(pi, root, e.seq()))
      if (s->load == nullptr || s->load->reason() != v1::LOAD_VDSO) members.push_back(BaseName(s->path));
    f->Detail("lookup scope",
              text::Show("{} (the global scope and {}'s own NEEDED closure)", Join(members), BaseName(root.path)));
  }

  // Load the provider RTLD_GLOBAL, or make o need it.
  void OutOfScopeFixes(const ProcessIndex& pi, const Obj& o, const Obj& p, FindingBuilder* f) {
    const bool python = o.load->has_python() || (p.load != nullptr && p.load->has_python());
    f->Fix(
        v1::FIX_LOAD_RTLD_GLOBAL,
        text::Show("load {} with RTLD_GLOBAL where it is loaded now ({}){}", NormalPath(p.path), ctx_.HowLoaded(pi, p),
                   python ? ": ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)" : ": dlopen(path, RTLD_NOW | RTLD_GLOBAL)"));
    const std::string pname = p.soname.empty() ? BaseName(p.path) : p.soname;
    const loader::Result own = loader::Search(pname, pi.AsRequester(o, ctx_.files()), pi.LoaderChain(o, ctx_.files()),
                                              pi.env);
    f->Fix(v1::FIX_ADD_NEEDED,
           text::Show(
               "or link {} against {} (a DT_NEEDED entry: patchelf --add-needed {} {}){}", BaseName(o.path), pname,
               text::ShellQuote(pname), text::ShellQuote(NormalPath(o.path)),
               !own.path.empty() && ctx_.SameFile(own.path, p.path)
                   ? ""
                   : text::Show(", with a RUNPATH that finds it (patchelf --add-rpath {} {})",
                                text::ShellQuote(DirName(NormalPath(p.path))), text::ShellQuote(NormalPath(o.path)))));
  }

  // Does a file that o's own search finds for one of its NEEDED names (any match along
  // the whole path, or one it was bound to) define s? Unreadable files count as yes
  // (unknown: no out-of-scope claim then).
  bool OwnNeededDefines(const ProcessIndex& pi, const Obj& o, const elf::ElfInfo& info, const elf::Symbol& s) {
    for (const auto& n : info.needed) {
      std::vector<std::string> files;
      if (const Obj* b = BoundFor(pi, o, n)) files.push_back(b->path);
      const loader::Result r = loader::Search(n, pi.AsRequester(o, ctx_.files()), pi.LoaderChain(o, ctx_.files()),
                                              pi.env, /*keep_going=*/true);
      if (!r.path.empty()) files.push_back(r.path);
      for (const auto& m : r.later) files.push_back(m.path);
      for (const auto& f : files) {
        const elf::ElfInfo* x = ctx_.files().Get(f);
        if (x == nullptr || x->Defines(s.name, s.version)) return true;
      }
    }
    return false;
  }

  // The object whose dlopen loaded o (o itself, or the requester chain up to a dlopen).
  static const Obj* DlopenRoot(const ProcessIndex& pi, const Obj& o) {
    const Obj* cur = &o;
    for (int i = 0; i < 64 && cur != nullptr && cur->load != nullptr; ++i) {
      if (cur->load->reason() == v1::LOAD_DLOPEN) return cur;
      if (cur->load->reason() != v1::LOAD_NEEDED) return nullptr;
      auto it = pi.objects.find(cur->requester);
      cur = it == pi.objects.end() ? nullptr : &it->second;
    }
    return nullptr;
  }

  // ---- A dlopen of a name that nothing on the search path holds ----

  // Whether `path` names, after collapsing "." and "..", an object mapped in this process
  // before `seq` and not yet unloaded then.
  static bool LoadedAt(const ProcessIndex& pi, const std::string& path, uint64_t seq) {
    const std::string want = std::filesystem::path(path).lexically_normal().string();
    for (const auto& [id, o] : pi.objects)
      if (o.open_seq < seq && o.close_seq > seq && !o.rolled_back &&
          std::filesystem::path(o.path.str()).lexically_normal().string() == want)
        return true;
    return false;
  }

  void Search(const ProcessIndex& pi, const v1::Entry& e) {
    const v1::SearchResult& s = e.search();
    if (s.has_same_as() || s.tried_size() == 0 || s.outcome().rfind("unknown", 0) == 0) return;
    auto it = pi.objects.find(s.requester().id());
    if (it == pi.objects.end()) return;
    const Obj& r = it->second;
    const std::string& name = s.requested_name();
    // NEEDED names are missing_library.cc's; a requester whose NEEDED list is not known
    // cannot be told apart.
    const elf::ElfInfo* info = ctx_.File(r.path);
    if (r.load == nullptr && info == nullptr) return;
    const auto& needed = r.load != nullptr ? r.load->needed() : google::protobuf::RepeatedPtrField<std::string>();
    if (std::find(needed.begin(), needed.end(), name) != needed.end()) return;
    if (info != nullptr && std::find(info->needed.begin(), info->needed.end(), name) != info->needed.end()) return;
    // LD_PRELOAD entries are searched for the executable before main.
    if (r.load != nullptr && r.load->reason() == v1::LOAD_EXECUTABLE && !StartedUp(pi, e.seq())) return;
    // "No new object mapped" is also what a name that resolves to a file already loaded
    // gives (dev/inode match): only candidates that do not exist make it "not found".
    // (Relative candidates are the traced process's, relative to its cwd.)
    // A candidate that is (lexically) the path of an object this process had loaded is
    // that file, whatever the disk holds now: a trace reported on another machine, or
    // after the files were removed, must not turn it into "not found".
    for (const auto& c : s.tried()) {
      const std::string p = !c.path().empty() && c.path()[0] != '/' && !pi.p->cwd().empty()
                                ? pi.p->cwd() + "/" + c.path() : c.path();
      if (LoadedAt(pi, p, e.seq())) return;
      struct stat st;
      if (stat(p.c_str(), &st) == 0) return;
    }
    if (name.find('/') == std::string::npos && NotInherited(pi, e, r)) return;
    const bool fatal = EndedAfter(pi, e);
    FindingBuilder f(pi, v1::DLOPEN_NOT_FOUND, fatal ? v1::ERROR : v1::INFO);
    *f.proto().add_objects() = ctx_.Describe(pi, r);
    f.proto().add_evidence(e.seq());
    const std::string py = render::PyCauseText(s.python(), pi.p->cwd());
    f.Headline(text::Show("dlopen of {} from {} failed: not found{}", name, BaseName(r.path),
                          fatal ? ", and the program ended" : ""));
    f.Detail("requested by",
             text::Show("{}, loaded {}{}", NormalPath(r.path), ctx_.HowLoaded(pi, r), py.empty() ? "" : ", for " + py));
    AddSearchDetails(ctx_, pi, r, name, &s, /*dlopen=*/true, &f);
    if (fatal)
      f.Detail("ended", text::Show("the process {} right after it, with no dlopen since: the program did not "
                                   "go on without {}",
                                   pi.p->killed_by_signal() != 0
                                       ? fmt::format("was killed by signal {}", pi.p->killed_by_signal())
                                       : fmt::format("exited with status {}", pi.p->exit_status()),
                                   name));
    else
      f.Detail("note",
               "packages probe for optional plugins this way on every start: if the program "
               "works without it, nothing needs doing");
    f.Fix(v1::FIX_INSTALL, text::Show("{} {}, install the package that provides it",
                                      fatal ? "the program needs" : "if the program should use", name));
    // A ctypes call's requester is the interpreter's _ctypes module: the fix is in the
    // code that made the call, not in that module.
    const v1::PyCause& cause = s.python();
    if (!cause.dlopen_call().empty() && !cause.call_site().file().empty()) {
      const std::string site = render::PyFrameText(cause.call_site(), pi.p->cwd());
      if (name.find('/') == std::string::npos)
        f.Fix(v1::FIX_DLOPEN_BY_PATH,
              text::Show("or, if {} is installed in a directory of its own, load it by its full path at {} "
                         "(DIR/{} in {}), or add DIR to LD_LIBRARY_PATH",
                         name, site, name, cause.dlopen_call()));
      else
        f.Fix(v1::FIX_LOAD_BY_PATH, text::Show("or, if {} is installed elsewhere, load it from there at {} (in {})",
                                               BaseName(name), site, cause.dlopen_call()));
    } else if (name.find('/') == std::string::npos) {
      f.Fix(v1::FIX_SET_VARIABLE, text::Show("or, if {} is installed in a directory of its own, add that directory to "
                                             "LD_LIBRARY_PATH or to {}'s RUNPATH (patchelf --add-rpath DIR {})",
                                             name, BaseName(r.path), text::ShellQuote(NormalPath(r.path))));
    }
    std::move(f).AddTo(out_);
  }

  // Whether the process ended unsuccessfully after the dlopen at e failed, with no other
  // dlopen after it: a failure the program did not survive. Only the command `run`
  // started has a known exit status; the others' failures are not judged.
  static bool EndedAfter(const ProcessIndex& pi, const v1::Entry& e) {
    const v1::ProcessTimeline& p = *pi.p;
    if (!p.has_exit_status() || (p.exit_status() == 0 && p.killed_by_signal() == 0)) return false;
    if (!p.exited() && p.killed_by_signal() == 0) return false;  // replaced by an exec, or lost events
    const std::string& name = e.search().requested_name();
    for (const v1::Entry* later : pi.entries) {
      if (later->seq() <= e.seq()) continue;
      const std::string& other = later->has_search()          ? later->search().requested_name()
                                 : later->has_failed_dlopen() ? later->failed_dlopen().requested_name()
                                                              : name;
      if (other != name) return false;
    }
    for (const auto& [id, o] : pi.objects)
      if (o.open_seq > e.seq() && o.load != nullptr && o.load->reason() == v1::LOAD_DLOPEN) return false;
    return true;
  }

  // Packages probe for many optional libraries (cupy for cuTENSOR on every use, cuDNN
  // for its sub-libraries, jax for libtpu): one process's absent probes become one
  // finding, the first in full, the others as a line each with how often it was tried.
  void FoldAbsent(int first) {
    auto* fs = out_->mutable_findings();
    int keep = -1;
    std::vector<std::string> order;
    std::map<std::string, int> times;
    for (int i = first; i < fs->size();) {
      if (fs->Get(i).kind() != v1::DLOPEN_NOT_FOUND || fs->Get(i).severity() != v1::INFO) {
        ++i;
        continue;
      }
      const std::string what = fs->Get(i).headline().substr(std::string("dlopen of ").size());
      const std::string key = what.substr(0, what.rfind(" failed: not found"));
      if (times[key]++ == 0) order.push_back(key);
      if (keep < 0) {
        keep = i++;
        continue;
      }
      fs->Mutable(keep)->mutable_evidence()->MergeFrom(fs->Get(i).evidence());
      fs->DeleteSubrange(i, 1);
    }
    if (keep < 0 || (order.size() == 1 && times[order[0]] == 1)) return;
    FindingBuilder f(std::move(*fs->Mutable(keep)));
    int total = 0;
    for (const auto& [k, n] : times) total += n;
    f.Headline(text::Show("{} dlopen{} of optional libraries failed: not found ({} name{})", total,
                          total == 1 ? "" : "s", order.size(), order.size() == 1 ? "" : "s"));
    // The list, then the first one's search in full.
    std::vector<v1::Detail> details(f.proto().details().begin(), f.proto().details().end());
    f.proto().clear_details();
    for (const auto& k : order)
      f.Detail("not found", text::Show("dlopen of {}{}", text::Shown::Escaped(k),  // a headline's: text
                                       times[k] > 1 ? fmt::format(" ({} times)", times[k]) : ""));
    for (const auto& d : details) f.Detail(text::Shown::Escaped(d.label()), text::Shown::Escaped(d.text()));
    *fs->Mutable(keep) = std::move(f).Finish();
  }

  // Whether the executable's start-up had finished at seq (a dlopen, not a preload).
  static bool StartedUp(const ProcessIndex& pi, uint64_t seq) {
    for (const auto& [id, o] : pi.objects)
      if (o.open_seq < seq && o.load != nullptr && o.load->reason() != v1::LOAD_PRELOAD &&
          o.load->reason() != v1::LOAD_EXECUTABLE && o.load->reason() != v1::LOAD_INTERPRETER)
        return true;
    return false;
  }

  // The RUNPATH-not-inherited shape: a RUNPATH directory of an object that loaded the
  // caller holds the name. Reported (warning) when true.
  bool NotInherited(const ProcessIndex& pi, const v1::Entry& e, const Obj& r) {
    const std::string& name = e.search().requested_name();
    loader::Environment env = pi.env;
    env.ld_library_path.clear();
    for (const loader::Object& l : pi.LoaderChain(r, ctx_.files())) {
      if (l.runpath.empty() || NormalPath(l.path) == NormalPath(r.path)) continue;
      loader::Object only = l;
      only.rpath.clear();
      const loader::Result found = loader::Search(name, only, {}, env);
      if (found.path.empty() || found.step != v1::STEP_RUNPATH) continue;
      const std::string file = NormalPath(found.path);
      const std::string lbase = BaseName(l.path), rbase = BaseName(r.path);
      FindingBuilder f(pi, v1::RUNPATH_NOT_INHERITED, v1::WARNING);
      *f.proto().add_objects() = ctx_.Describe(pi, r);
      f.proto().add_evidence(e.seq());
      f.Headline(text::Show("dlopen of {} from {} failed: only {}'s RUNPATH holds it", name, rbase, lbase));
      f.Detail("requested by", text::Show("{}, loaded {}", NormalPath(r.path), ctx_.HowLoaded(pi, r)));
      AddSearchDetails(ctx_, pi, r, name, &e.search(), /*dlopen=*/true, &f);
      f.Detail("would be found", text::Show("{}, in {}'s RUNPATH ({})", file, lbase, l.runpath));
      f.Detail("rule", text::Show("a dlopen searches the RUNPATH of the object that calls it ({}) only; "
                                  "a RUNPATH is not inherited by the objects it loads (an RPATH is, when "
                                  "the caller has no RUNPATH)",
                                  rbase));
      const loader::Object self = pi.AsRequester(r, ctx_.files());
      f.Fix(v1::FIX_SET_RUNPATH,
            text::Show("give {} a RUNPATH of its own that holds {}: patchelf --add-rpath {} {}", rbase, name,
                       DirName(file) == DirName(NormalPath(r.path)) ? text::Shown("'$ORIGIN'")
                                                                    : text::ShellQuote(DirName(file)),
                       text::ShellQuote(NormalPath(r.path))));
      f.Fix(v1::FIX_DLOPEN_BY_PATH, text::Show("or have {} dlopen {} by its full path", rbase, file));
      // glibc's RPATH walk follows l_loader, which a dlopen leaves empty (dl-load.c
      // clears the loader for __RTLD_CALLMAP): only a chain of NEEDED entries from l to
      // the caller, or the executable's own RPATH, reaches the caller's dlopen.
      if (self.runpath.empty() && ReachesByNeeded(pi, r, l))
        f.Fix(v1::FIX_LINK_RPATH, text::Show("or link {} with an RPATH instead of a RUNPATH (-Wl,--disable-new-dtags), "
                                             "which objects it loads inherit",
                                             lbase));
      std::move(f).AddTo(out_);
      return true;
    }
    return false;
  }

  // l is the executable, or r was loaded through NEEDED entries only from l.
  static bool ReachesByNeeded(const ProcessIndex& pi, const Obj& r, const loader::Object& l) {
    const Obj* exe = pi.Executable();
    if (exe != nullptr && NormalPath(exe->path) == NormalPath(l.path)) return true;
    const Obj* cur = &r;
    for (int i = 0; i < 64 && cur != nullptr && cur->load != nullptr; ++i) {
      if (cur->load->reason() != v1::LOAD_NEEDED) return false;
      auto it = pi.objects.find(cur->requester);
      cur = it == pi.objects.end() ? nullptr : &it->second;
      if (cur != nullptr && NormalPath(cur->path) == NormalPath(l.path)) return true;
    }
    return false;
  }

  Context& ctx_;
  v1::Report* out_;
};

}  // namespace

void FindFailedDlopens(Context& ctx, v1::Report* out) { Pass(ctx, out).Run(); }

}  // namespace ldscope::analysis
