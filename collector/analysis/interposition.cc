// Symbol interposition: a symbol an object's own DT_NEEDED closure defines, which glibc
// binds instead to an object that comes first in the global lookup scope (the
// executable, LD_PRELOAD, an earlier RTLD_GLOBAL dlopen). Computed from the ELF files
// and the scope model, not from la_symbind. Whether a dlopen was RTLD_GLOBAL is known
// only in Python (the hook reads ctypes' mode and sys.getdlopenflags() for imports);
// elsewhere it is unknown, and a finding that rests on it says so (information only).
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"

namespace ldscope::analysis {
namespace {

enum class Via { kExecutable, kPreload, kGlobalDlopen, kMaybeGlobalDlopen };

struct GlobalEntry {
  const Obj* o;
  uint64_t since;  // in the global scope from this sequence number on
  Via via;
  const Obj* root;  // the preload or dlopen that brought it
};

class Pass {
 public:
  Pass(Context& ctx, const ProcessIndex& pi, v1::Report* out) : ctx_(ctx), pi_(pi), out_(out) {}

  void Run() {
    BuildGlobal();
    if (global_.empty()) return;
    std::vector<const Obj*> objs;
    for (const auto& [id, o] : pi_.objects)
      if (!o.rolled_back && o.load != nullptr && o.lmid == 0 && o.load->reason() != v1::LOAD_VDSO &&
          o.load->reason() != v1::LOAD_INTERPRETER)
        objs.push_back(&o);
    // A sweep in load order keeps alive_ to the global entries in scope when each object
    // was relocated (joined at or before it, not closed before it), so that a trace of
    // many dlopens and dlcloses is not looked up entry by entry for every symbol.
    const auto by_open = InOrder(objs.size(), [&](size_t i) { return objs[i]->open_seq; });
    const auto by_since = InOrder(global_.size(), [&](size_t i) { return global_[i].since; });
    const auto by_close = InOrder(global_.size(), [&](size_t i) { return global_[i].o->close_seq; });
    size_t joined = 0, left = 0;
    for (const auto& [open_seq, oi] : by_open) {
      const Obj* o = objs[oi];
      for (; joined < by_since.size() && by_since[joined].first <= open_seq; ++joined)
        if (global_[by_since[joined].second].o->close_seq > open_seq) Join(by_since[joined].second);
      for (; left < by_close.size() && by_close[left].first <= open_seq; ++left) Leave(by_close[left].second);
      Check(*o);
    }
    for (auto& [key, g] : groups_) Report(key.first, key.second, g);
  }

 private:
  // (key(i), i) for i < n, in the order of key, stable: sorted only when not in order
  // already (a churn's objects and scope entries come in load order: a million of them
  // are not sorted again). The pairs, not indexes compared through their objects: the
  // sort and the sweep do not chase a pointer per comparison.
  template <typename Key>
  static std::vector<std::pair<uint64_t, uint32_t>> InOrder(size_t n, Key key) {
    std::vector<std::pair<uint64_t, uint32_t>> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = {key(i), static_cast<uint32_t>(i)};
    SortUnlessSorted(v, std::less<>());
    return v;
  }

  // alive_ is kept in scope order; entries join mostly at its end.
  void Join(size_t gi) {
    auto it = std::lower_bound(alive_.begin(), alive_.end(), gi);
    if (it == alive_.end() || *it != gi) alive_.insert(it, gi);
  }
  void Leave(size_t gi) {
    auto it = std::lower_bound(alive_.begin(), alive_.end(), gi);
    if (it != alive_.end() && *it == gi) alive_.erase(it);
  }

  static constexpr size_t kMaxClosure = 4096;

  // o and its DT_NEEDED closure, breadth first (glibc's order), at most kMaxClosure
  // objects; each member is seen once (a mark per object, not a search of the list).
  // skip_closed: without the objects whose closure an earlier RTLD_GLOBAL dlopen put in
  // the global scope whole (closed_), nor what is reached only through them: the
  // closures of a chain of dlopens are then each as long as what the dlopen added.
  std::vector<const Obj*> Closure(const Obj& o, bool skip_closed = false) const {
    if (mark_.empty()) mark_.resize(pi_.objects.slots());
    if (++stamp_ == 0) {  // the marks wrapped around: clear them
      std::fill(mark_.begin(), mark_.end(), 0);
      stamp_ = 1;
    }
    std::vector<const Obj*> q = {&o};
    mark_[o.index] = stamp_;
    for (size_t i = 0; i < q.size() && q.size() < kMaxClosure; ++i)
      for (const Obj* b : NeededBound(*q[i])) {
        if (b == nullptr || mark_[b->index] == stamp_) continue;
        mark_[b->index] = stamp_;
        if (skip_closed && !closed_.empty() && closed_[b->index]) continue;
        q.push_back(b);
      }
    return q;
  }

  // What each of o's NEEDED names was bound to, in order (computed once per object).
  const std::vector<const Obj*>& NeededBound(const Obj& o) const {
    if (needed_bound_.empty()) needed_bound_.resize(pi_.objects.slots());
    auto& [known, bound] = needed_bound_[o.index];
    if (known) return bound;
    known = true;
    if (o.load != nullptr) {
      for (const auto& n : o.load->needed()) bound.push_back(BoundFor(pi_, o, n));
    } else if (const elf::ElfInfo* e = ctx_.File(o.path)) {
      for (const auto& n : e->needed) bound.push_back(BoundFor(pi_, o, n));
    }
    return bound;
  }

  // RTLD_GLOBAL for a dlopen root: from the ctypes call's mode; otherwise unknown.
  enum class Mode { kGlobal, kLocal, kUnknown };
  static Mode ModeOf(const Obj& root) {
    if (root.load == nullptr || !root.load->has_dlopen_mode()) return Mode::kUnknown;
    return (root.load->dlopen_mode() & RTLD_GLOBAL) != 0 ? Mode::kGlobal : Mode::kLocal;
  }

  void Add(const Obj* o, uint64_t since, Via via, const Obj* root) {
    if (in_global_.empty()) in_global_.resize(pi_.objects.slots());
    if (in_global_[o->index]) return;
    in_global_[o->index] = true;
    global_.push_back({o, since, via, root});
  }

  void BuildGlobal() {
    uint64_t first_dlopen = UINT64_MAX;
    std::vector<const Obj*> order;
    for (const auto& [id, o] : pi_.objects) {
      if (o.load == nullptr || o.lmid != 0) continue;
      order.push_back(&o);
      if (o.load->reason() == v1::LOAD_DLOPEN) first_dlopen = std::min(first_dlopen, o.open_seq);
    }
    SortUnlessSorted(order, LoadedBefore);
    const Obj* exe = pi_.Executable();
    if (exe != nullptr) Add(exe, 0, Via::kExecutable, exe);
    for (const Obj* o : order)
      if (o->load->reason() == v1::LOAD_PRELOAD)
        for (const Obj* c : Closure(*o)) {
          if (c->open_seq < first_dlopen && c != exe) preload_closure_[c] = o;
          if (c == o) Add(o, 0, Via::kPreload, o);
        }
    // The rest of start-up, then the preloads' own dependencies, in load order; these are
    // the scope the winners are measured against, not winners themselves.
    for (const Obj* o : order)
      if (o->open_seq < first_dlopen && o->load->reason() == v1::LOAD_NEEDED) {
        auto p = preload_closure_.find(o);
        startup_.push_back(o);
        if (p != preload_closure_.end()) Add(o, 0, Via::kPreload, p->second);
      }
    for (const Obj* o : order)
      if (o->load->reason() == v1::LOAD_DLOPEN && ModeOf(*o) != Mode::kLocal) {
        // glibc adds the closure to the global scope after relocating it: objects of the
        // same dlopen do not see it there.
        // The objects skipped as closed were loaded by earlier dlopens: before o, so
        // they change neither `since` nor what is added.
        const auto closure = Closure(*o, /*skip_closed=*/true);
        uint64_t since = o->open_seq;
        for (const Obj* c : closure) since = std::max(since, c->open_seq);
        for (const Obj* c : closure)
          Add(c, since + 1, ModeOf(*o) == Mode::kGlobal ? Via::kGlobalDlopen : Via::kMaybeGlobalDlopen, o);
        if (closure.size() < kMaxClosure) {
          if (closed_.empty()) closed_.resize(pi_.objects.slots());
          for (const Obj* c : closure) closed_[c->index] = true;
        }
      }
    files_.resize(global_.size());
    for (size_t i = 0; i < global_.size(); ++i) files_[i] = ctx_.File(global_[i].o->path);
  }

  // The first definer in the global scope as o's relocation saw it; start-up objects
  // that no preload brought sit between the preloads and the RTLD_GLOBAL dlopens.
  const GlobalEntry* Winner(const Obj& o, const elf::SymbolQuery& q, const std::vector<const Obj*>& closure) {
    // The global entries that define the name, whatever the version (a lookup in each
    // one's own hash table), in scope order.
    for (size_t gi : alive_) {
      if (files_[gi] == nullptr) continue;
      const elf::Lookup l = files_[gi]->Find(q);
      if (!l.named) continue;
      const GlobalEntry& g = global_[gi];
      if (g.since > o.open_seq || g.o == &o) continue;
      if (g.via == Via::kGlobalDlopen || g.via == Via::kMaybeGlobalDlopen) {
        // Start-up objects come first in the scope: one of them defining it wins.
        if (startup_scope_ == nullptr) {
          std::vector<const elf::ElfInfo*> files;
          for (const Obj* s : startup_)
            if (const elf::ElfInfo* e = ctx_.File(s->path)) files.push_back(e);
          startup_scope_ = std::make_unique<SymbolScope>(std::move(files));
        }
        if (startup_scope_->Defines(q)) return nullptr;
      }
      if (!l.matches) continue;
      if (std::find(closure.begin(), closure.end(), g.o) != closure.end()) return nullptr;
      return &g;
    }
    return nullptr;
  }

  // Whether file `in` names any undefined symbol of file `of` (each looked up in in's own
  // hash table), asked once per pair of files.
  bool NamesAnyUndefined(const elf::ElfInfo* of, const elf::ElfInfo* in) {
    const auto [it, fresh] = names_any_.try_emplace({of, in}, false);
    if (fresh) {
      bool named = false;  // (a lambda takes no structured binding before C++20)
      of->ForEachUndefined([&](const elf::Symbol&, const elf::SymbolQuery& q) { named = named || in->Find(q).named; });
      it->second = named;
    }
    return it->second;
  }

  void Check(const Obj& o) {
    const elf::ElfInfo* e = ctx_.File(o.path);
    if (e == nullptr) return;
    // Winner finds nothing when no global entry in scope names any of o's undefined
    // symbols: then an object of a file checked before (a churn's million objects) is
    // not looked up symbol by symbol. The first of each file is (most files of a
    // program are loaded once: the question would cost as much as the lookups).
    if (!checked_.insert(e).second &&
        std::none_of(alive_.begin(), alive_.end(),
                     [&](size_t gi) { return files_[gi] != nullptr && NamesAnyUndefined(e, files_[gi]); }))
      return;
    std::vector<const Obj*> closure;
    std::vector<const elf::ElfInfo*> closure_files;  // parallel; nullptr for o and unreadable ones
    e->ForEachUndefined([&](const elf::Symbol& s, const elf::SymbolQuery& q) {
      if (closure.empty()) {
        closure = Closure(o);
        for (const Obj* c : closure) closure_files.push_back(c != &o ? ctx_.File(c->path) : nullptr);
      }
      const GlobalEntry* w = Winner(o, q, closure);
      if (w == nullptr) return;
      const Obj* loser = nullptr;
      for (size_t i = 0; i < closure.size(); ++i)
        if (closure_files[i] != nullptr && closure_files[i]->Defines(q)) {
          loser = closure[i];
          break;
        }
      if (loser == nullptr || ctx_.SameFile(loser->path, w->o->path) ||
          (!loser->soname.empty() && loser->soname == w->o->soname))
        return;
      // Vague linkage (inline functions, template instantiations, their static data) is
      // weak or unique in both copies and meant to be merged; the executable's copies of
      // library data are copy relocations, also by design.
      const elf::ElfInfo* we = ctx_.files().Get(w->o->path);
      const elf::ElfInfo* le = ctx_.File(loser->path);
      if (we == nullptr || le == nullptr) return;
      const elf::Lookup wl = we->Find(q), ll = le->Find(q);
      if (!wl.named || !ll.named) return;
      const elf::Symbol& wd = wl.first;
      const elf::Symbol& ld = ll.first;
      if (wd.weak || ld.weak || wd.unique || ld.unique) return;
      // Programs that replace C library functions (bash's malloc and getenv) do so on
      // purpose; an LD_PRELOAD that does is reported, as information.
      if (w->via == Via::kExecutable && (wd.data || (IsSystemRuntime(loser->path) && InSystemDir(loser->path))))
        return;
      auto& g = groups_[{w, loser}];
      const std::string sym = s.version.empty() ? std::string(s.name) : fmt::format("{}@{}", s.name, s.version);
      if (std::find(g.symbols.begin(), g.symbols.end(), sym) == g.symbols.end()) g.symbols.push_back(sym);
      if (std::find(g.requesters.begin(), g.requesters.end(), &o) == g.requesters.end()) g.requesters.push_back(&o);
    });
  }

  struct Group {
    std::vector<std::string> symbols;
    std::vector<const Obj*> requesters;
  };

  static std::string FirstFew(const std::vector<std::string>& v, size_t n = 4) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < n; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > n) out += fmt::format(" and {} more", v.size() - n);
    return out;
  }

  void Report(const GlobalEntry* w, const Obj* loser, const Group& g) {
    // Two copies of one runtime (a wheel's renamed libgomp and the system's): binding to
    // the first is how they end up sharing one; the runtime-family finding lists them.
    const RuntimeId rw = Classify(w->o->soname.empty() ? w->o->path : w->o->soname, ctx_.files().Get(w->o->path));
    const RuntimeId rl = Classify(loser->soname.empty() ? loser->path : loser->soname, ctx_.File(loser->path));
    const bool same_runtime = rw.runtime != Runtime::kNone && rw.runtime == rl.runtime &&
                              rw.implementation == rl.implementation;
    const v1::Severity sev = w->via == Via::kGlobalDlopen && !same_runtime ? v1::WARNING : v1::INFO;
    FindingBuilder f(pi_, v1::SYMBOL_INTERPOSITION, sev);
    *f.proto().add_objects() = ctx_.Describe(pi_, *w->o);
    *f.proto().add_objects() = ctx_.Describe(pi_, *loser);
    for (const Obj* r : g.requesters) *f.proto().add_objects() = ctx_.Describe(pi_, *r);
    f.proto().add_evidence(w->o->open_seq);
    f.proto().add_evidence(loser->open_seq);
    const char* how = w->via == Via::kPreload        ? "LD_PRELOAD"
                      : w->via == Via::kExecutable   ? "the executable"
                      : w->via == Via::kGlobalDlopen ? "an RTLD_GLOBAL dlopen"
                                                     : "a dlopen, if RTLD_GLOBAL";
    f.Headline(text::Show("{} {} of {}'s own {} bound to {} ({})", g.symbols.size(),
                          g.symbols.size() == 1 ? "symbol" : "symbols", BaseName(g.requesters.front()->path),
                          BaseName(loser->path), BaseName(w->o->path), how));
    f.Detail("symbols", text::ShowBytes(FirstFew(g.symbols)));
    std::vector<std::string> reqs;
    for (const Obj* r : g.requesters) reqs.push_back(NormalPath(r->path));
    f.Detail("requested by", text::ShowBytes(FirstFew(reqs, 3)));
    f.Detail("bound to", text::Show("{} ({})", NormalPath(w->o->path), ctx_.HowLoaded(pi_, *w->o)));
    if (w->root != w->o)
      f.Detail("in the global scope through",
               text::Show("{} ({})", NormalPath(w->root->path), ctx_.HowLoaded(pi_, *w->root)));
    f.Detail("own definition", text::Show("{} ({})", NormalPath(loser->path), ctx_.HowLoaded(pi_, *loser)));
    if (same_runtime)
      f.Detail("same runtime", text::Show("both are {}: the calls reach one copy of it, as sharing one "
                                          "runtime needs",
                                          rw.implementation));
    if (same_runtime) {
      f.Fix(v1::FIX_NONE, text::Show("none needed while both copies are of compatible versions; to keep "
                                     "{} on its own copy, load {} before {}",
                                     BaseName(g.requesters.front()->path), BaseName(g.requesters.front()->path),
                                     BaseName(w->root->path)));
    } else if (w->via == Via::kGlobalDlopen || w->via == Via::kMaybeGlobalDlopen) {
      const v1::PyCause& py = w->root->load->python();
      if (w->via == Via::kMaybeGlobalDlopen)
        f.Detail("RTLD_GLOBAL",
                 "unknown (the trace has the mode of Python's ctypes calls and imports "
                 "only); the binding above holds only if that dlopen was RTLD_GLOBAL");
      else if (!py.dlopen_call().empty())
        f.Detail("RTLD_GLOBAL", text::ShowBytes("yes, " + py.dlopen_call()));
      else if (!py.import_module().empty())
        f.Detail("RTLD_GLOBAL", text::Show("yes, sys.getdlopenflags() had it during import {}", py.import_module()));
      else
        f.Detail("RTLD_GLOBAL", "yes");
      if (!py.import_module().empty() && py.dlopen_call().empty() && w->via == Via::kGlobalDlopen)
        f.Fix(v1::FIX_LOAD_RTLD_LOCAL,
              text::Show("take RTLD_GLOBAL out of sys.setdlopenflags() before import {} (or restore "
                         "the flags right after what needed it)",
                         py.import_module()));
      else
        f.Fix(v1::FIX_LOAD_RTLD_LOCAL,
              text::Show("load {} without RTLD_GLOBAL (RTLD_LOCAL, ctypes' default mode), so its "
                         "symbols stay private to it",
                         BaseName(w->root->path)));
      f.Fix(v1::FIX_SWAP_IMPORTS,
            text::Show("or load {} before {}, so that its own {} is bound first", BaseName(g.requesters.front()->path),
                       BaseName(w->root->path), BaseName(loser->path)));
    } else if (w->via == Via::kPreload) {
      f.Fix(v1::FIX_NONE, text::Show("none if intended (an allocator such as jemalloc or tcmalloc is "
                                     "preloaded for exactly this); otherwise remove {} from LD_PRELOAD",
                                     NormalPath(w->root->path)));
    } else {
      // Not -Bsymbolic in the bypassed copy: it binds that library's own references to
      // its definitions, and the calls bound here are other objects'.
      f.Fix(v1::FIX_HIDE_SYMBOLS, text::Show("build {} without exporting {} (-fvisibility=hidden, or a version "
                                             "script)",
                                             BaseName(w->o->path), g.symbols.front()));
    }
    std::move(f).AddTo(out_);
  }

  Context& ctx_;
  const ProcessIndex& pi_;
  v1::Report* out_;
  std::vector<GlobalEntry> global_;
  std::vector<size_t> alive_;  // indexes into global_, sorted: in scope order (see Run)
  std::vector<bool> in_global_;  // by Obj::index
  std::vector<const Obj*> startup_;
  std::map<const Obj*, const Obj*> preload_closure_;
  std::vector<const elf::ElfInfo*> files_;  // of global_, nullptr where unreadable
  std::unique_ptr<SymbolScope> startup_scope_;  // the start-up objects, when needed
  mutable std::vector<std::pair<bool, std::vector<const Obj*>>> needed_bound_;  // by Obj::index
  mutable std::vector<uint32_t> mark_;  // by Obj::index: stamp_ when Closure reached it
  mutable uint32_t stamp_ = 0;
  std::vector<bool> closed_;  // by Obj::index: it and its closure are in the global scope
  std::map<std::pair<const GlobalEntry*, const Obj*>, Group> groups_;
  std::map<std::pair<const elf::ElfInfo*, const elf::ElfInfo*>, bool> names_any_;  // NamesAnyUndefined
  std::unordered_set<const elf::ElfInfo*> checked_;  // files of objects Check saw
};

}  // namespace

void FindInterposition(Context& ctx, v1::Report* out) {
  for (const auto& pi : ctx.processes()) Pass(ctx, pi, out).Run();
}

}  // namespace ldscope::analysis
