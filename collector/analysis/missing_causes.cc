// Why a symbol that nothing in scope defines is missing (missing_symbols.h), told from
// what the objects of the lookup scope do define:
// - the exact name is there but not exported: a local symbol of an object's .symtab, or
//   only a non-default version (CAUSE_NOT_EXPORTED);
// - a Python/C API name the interpreter does not export (CAUSE_PYTHON_API);
// - a C++ name exported with the same qualified name but other parameters: spelled with
//   the other C++ library ABI (CAUSE_CXX_ABI), or another signature (CAUSE_HOST_VERSION).
// Only symbols that no file on the object's search path defines either are looked at
// (those the loader could have found are explained by where it looked instead).
#include <algorithm>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "analysis/missing_symbols.h"
#include "text/escape.h"
#include "elf/demangle.h"

namespace ldscope::analysis {
namespace {

// At most this many objects' .symtab are read for one failure (most system libraries
// have none: stripped).
constexpr size_t kMaxSymtabFiles = 16;
// Near-miss search bounds: names looked for, definitions demangled, near-misses kept.
constexpr size_t kMaxWanted = 64;
constexpr size_t kMaxDemangled = 50000;
constexpr size_t kMaxNear = 3;
// Up to this many names looked for, a definition is first searched for their text.
constexpr size_t kFewNames = 4;

bool Open(const Missing& m) {
  return m.cause == v1::MISSING_CAUSE_UNSPECIFIED && !m.version_only && m.provider.empty() && m.out_of_scope == nullptr;
}

// The objects to look into: o's NEEDED objects first (where a host library is), then
// the rest of its scope; not o itself, nor the vDSO.
std::vector<const Obj*> Candidates(const ProcessIndex& pi, const Obj& o, const std::vector<const Obj*>& scope) {
  std::vector<const Obj*> out;
  auto add = [&](const Obj* c) {
    if (c == nullptr || c == &o || c->path.empty()) return;
    if (c->load != nullptr && c->load->reason() == v1::LOAD_VDSO) return;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (o.load != nullptr)
    for (const auto& n : o.load->needed()) add(BoundFor(pi, o, n));
  for (const Obj* c : scope) add(c);
  return out;
}

// The exact name defined, but not where an unversioned reference can bind to it.
void NotExported(Context& ctx, const std::vector<const Obj*>& objs, std::vector<Missing>* missing) {
  std::vector<std::string> names;
  for (Missing& m : *missing) {
    if (!Open(m)) continue;
    for (const Obj* c : objs) {
      const elf::ElfInfo* e = ctx.File(c->path);
      if (e == nullptr) continue;
      const elf::Lookup l = e->Find(elf::SymbolQuery(m.name, m.version));
      // glibc's check_match: an unversioned reference never binds to a hidden version.
      if (l.named && !l.matches && m.version.empty() && l.first.hidden) {
        m.cause = v1::CAUSE_NOT_EXPORTED;
        m.holder = c;
        m.hidden_version = std::string(l.first.version);
        break;
      }
    }
    if (Open(m)) names.push_back(m.name);
  }
  if (names.empty()) return;
  size_t read = 0;
  for (const Obj* c : objs) {
    if (read == kMaxSymtabFiles) break;
    const elf::ElfInfo* e = ctx.File(c->path);
    if (e == nullptr || e->from_trace) continue;  // .symtab is not in the trace's facts
    ++read;
    auto r = elf::FindLocalDefinitions(c->path, names, e->dev, e->ino);
    if (!r.ok()) continue;  // unknown, not absent: the symbol keeps no cause
    for (const auto& d : r->found)
      for (Missing& m : *missing)
        if (Open(m) && m.name == d.name) {
          m.cause = v1::CAUSE_NOT_EXPORTED;
          m.holder = c;
          m.local_kind = d.kind;
          m.local_source = d.source;
        }
  }
}

// A Python/C API name: Py or _Py, then a capital or an underscore (PyErr_Fetch, Py_None,
// _PyObject_GC_New).
bool CApiName(std::string_view n) {
  if (n.substr(0, 1) == "_") n.remove_prefix(1);
  return n.size() > 2 && n.substr(0, 2) == "Py" && ((n[2] >= 'A' && n[2] <= 'Z') || n[2] == '_');
}

// The object that holds the running interpreter's C API: libpython when one is loaded,
// else a python executable.
const Obj* Interpreter(const ProcessIndex& pi) {
  for (const auto& [id, o] : pi.objects)
    if (!o.rolled_back && BaseName(o.path).rfind("libpython", 0) == 0) return &o;
  const Obj* exe = pi.Executable();
  return exe != nullptr && BaseName(exe->path).rfind("python", 0) == 0 ? exe : nullptr;
}

void PythonApi(Context& ctx, const ProcessIndex& pi, std::vector<Missing>* missing) {
  const Obj* interp = Interpreter(pi);
  const elf::ElfInfo* e = interp != nullptr ? ctx.File(interp->path) : nullptr;
  if (e == nullptr) return;
  std::string version, from;
  if (pi.p->has_python() && !pi.p->python().version().empty()) {
    version = pi.p->python().version();
    from = "as ldscope's Python hook read it";
  } else {
    std::smatch v;
    const std::string base = BaseName(interp->path);
    if (std::regex_search(base, v, std::regex("python([0-9]+\\.[0-9]+)"))) {
      version = v[1];
      from = "from the name " + base;
    }
  }
  for (Missing& m : *missing) {
    if (!Open(m) || !CApiName(m.name) || e->Defines(m.name, m.version)) continue;
    m.cause = v1::CAUSE_PYTHON_API;
    m.holder = interp;
    m.python_version = version;
    m.python_version_from = from;
  }
}

// One C++ name looked for: its qualified name without parameters.
struct Want {
  Missing* m;
  std::string qualified;
};

// Definitions of objs with the qualified name of a missing C++ symbol.
void NearMisses(Context& ctx, const std::vector<const Obj*>& objs, std::vector<Missing>* missing) {
  std::vector<Want> wants;
  std::map<std::string, std::vector<size_t>, std::less<>> by_token;  // LastSourceName -> wants
  // The wanted names' lengths: most of a definition's candidates are told apart by length
  // alone (hundreds of thousands of definitions in a torch process).
  std::vector<bool> lengths(256);
  // Their identifiers: with a few, a definition that holds none of them is passed over
  // with a search for each (memchr-fast) before its source names are read.
  std::vector<std::string> idents;
  for (Missing& m : *missing) {
    if (!Open(m) || wants.size() == kMaxWanted || m.demangled.empty()) continue;
    std::string q = elf::WithoutParameters(m.demangled);
    const std::string token = elf::LastSourceName(q);
    if (token.empty()) continue;
    by_token[token].push_back(wants.size());
    const size_t digits = token.find_first_not_of("0123456789");
    const size_t n = token.size() - digits;  // the identifier's length (the token's <length>)
    if (n < lengths.size()) lengths[n] = true;
    idents.push_back(token.substr(digits));
    wants.push_back({&m, std::move(q)});
  }
  if (wants.empty()) return;
  size_t demangled = 0;
  std::vector<std::string_view> tokens;
  std::vector<const elf::ElfInfo*> seen;
  for (const Obj* c : objs) {
    const elf::ElfInfo* e = ctx.File(c->path);
    if (e == nullptr || std::find(seen.begin(), seen.end(), e) != seen.end()) continue;
    seen.push_back(e);
    e->ForEachSymbol(elf::ElfInfo::Which::kDefined, [&](const elf::Symbol& s) {
      if (demangled >= kMaxDemangled || s.name.size() < 3 || s.name.substr(0, 2) != "_Z") return;
      if (idents.size() <= kFewNames && std::none_of(idents.begin(), idents.end(), [&](const std::string& i) {
            return s.name.find(i) != std::string_view::npos;
          }))
        return;
      elf::SourceNameCandidates(s.name, &tokens, &lengths);
      for (std::string_view t : tokens) {
        auto it = by_token.find(t);
        if (it == by_token.end()) continue;
        const std::string d = elf::Demangle(s.name);
        ++demangled;
        const std::string q = elf::WithoutParameters(d);
        for (size_t i : it->second) {
          Missing& m = *wants[i].m;
          if (wants[i].qualified == q && s.name != m.name && m.near.size() < kMaxNear)
            m.near.push_back({c, std::string(s.name), d});
        }
        return;
      }
    });
  }
  for (const Want& w : wants) {
    Missing& m = *w.m;
    if (m.near.empty()) continue;
    const std::string old = elf::OldAbiSpelling(m.demangled);
    auto same_abi = [&](const NearMissDef& n) { return elf::OldAbiSpelling(n.demangled) == old; };
    std::stable_partition(m.near.begin(), m.near.end(), same_abi);
    m.cause = same_abi(m.near.front()) ? v1::CAUSE_CXX_ABI : v1::CAUSE_HOST_VERSION;
    m.holder = m.near.front().object;
  }
}

// ---- The finding's words ----

const char* Is(const Group& g) { return g.size() == 1 ? "is" : "are"; }

// "c10::cuda::SetDevice(int) (_ZN3c104cuda9SetDeviceEi)", several joined by "; ".
std::string NeedsText(const Group& g) {
  std::vector<std::string> items;
  for (size_t i = 0; i < g.size() && i < 4; ++i)
    items.push_back(g[i]->demangled.empty() ? g[i]->name : fmt::format("{} ({})", g[i]->demangled, g[i]->name));
  std::string out = fmt::format("{}", fmt::join(items, "; "));
  if (g.size() > 4) out += fmt::format("; and {} more", g.size() - 4);
  return out;
}

// "torch 2.5.1" for a file a pip distribution installed, else its base name.
std::string HostName(PipOwners& owners, const Obj& o) {
  const auto& d = owners.Of(o.path);
  return d && !d->name.empty() ? d->name : BaseName(o.path);
}

// The holder as a labelled line: its path and version, who installed it, how it loaded.
std::string HolderText(Context& ctx, const ProcessIndex& pi, const Obj& h, PipOwners& owners) {
  const v1::Library b = ctx.Describe(pi, h);
  const auto& d = owners.Of(h.path);
  return fmt::format("{}{}, loaded {}", Label(b),
                     d ? fmt::format(", installed by pip's {} ({})", PipLabel(d), d->dist_info) : "", b.loaded_by());
}

// "the Python 3.11.2" / "this Python".
std::string PythonWords(const Missing& m) {
  return m.python_version.empty() ? "this Python" : "Python " + m.python_version;
}

// cp311 for 3.11.x; "" when unknown.
std::string PythonTag(const std::string& version) {
  std::smatch v;
  if (!std::regex_search(version, v, std::regex("^([0-9]+)\\.([0-9]+)"))) return "";
  return fmt::format("cp{}{}", v[1].str(), v[2].str());
}

// 0 or 1: the _GLIBCXX_USE_CXX11_ABI of a name's spelling.
int AbiOf(std::string_view demangled) { return elf::UsesCxx11Abi(demangled) ? 1 : 0; }

std::string NotExportedWhy(Context& ctx, const Missing& m) {
  const std::string holder = BaseName(m.holder->path);
  if (!m.hidden_version.empty())
    return fmt::format(
        "{} defines {} only as {}@{}, a non-default version: a reference without a version "
        "never binds to it",
        holder, m.name, m.name, m.hidden_version);
  const char* hidden = "hidden visibility (-fvisibility=hidden, or __attribute__((visibility(\"hidden\"))))";
  switch (m.local_kind) {
    case elf::LocalKind::kFileLocal:
      return fmt::format("it is static (local to {}): nothing outside that file can use it", m.local_source);
    case elf::LocalKind::kHidden:
      return fmt::format("it has {}: the link made it local", hidden);
    case elf::LocalKind::kLinkLocal: {
      const elf::ElfInfo* e = ctx.File(m.holder->path);
      if (e != nullptr && !e->verdefs.empty())
        return fmt::format(
            "the link made it local: {}'s version script (version {}) does not list it under "
            "global:, or it has {}",
            holder, e->verdefs.front(), hidden);
      return fmt::format("the link made it local: it has {}, or a version script does not list it under global:",
                         hidden);
    }
  }
  return "";
}

size_t IndexOf(const std::vector<const Obj*>& objs, const Obj* o) {
  return static_cast<size_t>(std::find(objs.begin(), objs.end(), o) - objs.begin());
}

// What the files of objs say of every named symbol of missing (whether or not a file on
// the search path defines it: the memo serves objects whose paths differ), by name and
// version.
std::map<std::string, CauseMemo::Found> Read(Context& ctx, const std::vector<const Obj*>& objs,
                                             const std::vector<Missing>& missing) {
  std::vector<Missing> all;
  for (const Missing& m : missing) {
    if (m.version_only) continue;
    Missing a;
    a.name = m.name;
    a.version = m.version;
    a.demangled = m.demangled;
    all.push_back(std::move(a));
  }
  NotExported(ctx, objs, &all);
  NearMisses(ctx, objs, &all);
  std::map<std::string, CauseMemo::Found> out;
  for (const Missing& a : all) {
    if (a.cause == v1::MISSING_CAUSE_UNSPECIFIED) continue;
    CauseMemo::Found& f = out[a.name + '\0' + a.version];
    f.cause = a.cause;
    f.holder = IndexOf(objs, a.holder);
    f.local_kind = a.local_kind;
    f.local_source = a.local_source;
    f.hidden_version = a.hidden_version;
    for (const auto& n : a.near) f.near.push_back({IndexOf(objs, n.object), n.name, n.demangled});
  }
  return out;
}

}  // namespace

std::string CauseHeadline(Context& ctx, const Group& g, PipOwners& owners) {
  const Missing& m = *g.front();
  switch (m.cause) {
    case v1::CAUSE_CXX_ABI:
      return fmt::format("built with _GLIBCXX_USE_CXX11_ABI={}, {} with _GLIBCXX_USE_CXX11_ABI={}", AbiOf(m.demangled),
                         BaseName(m.holder->path), AbiOf(m.near.front().demangled));
    case v1::CAUSE_HOST_VERSION: {
      const auto& d = owners.Of(m.holder->path);
      return fmt::format("built against another version of {} than the one loaded ({})", HostName(owners, *m.holder),
                         d && !d->version.empty() ? d->version : ctx.VersionOf(m.holder->path, m.holder->soname));
    }
    case v1::CAUSE_PYTHON_API:
      return fmt::format("it calls {}, which {} does not export", SymbolList(g), PythonWords(m));
    case v1::CAUSE_NOT_EXPORTED:
      return fmt::format("{} {} in {} but not exported", SymbolList(g), Is(g), BaseName(m.holder->path));
    default:
      return "";
  }
}

void CauseDetails(Context& ctx, const ProcessIndex& pi, const Obj& o, const Group& g, PipOwners& owners,
                  FindingBuilder* f) {
  const Missing& m = *g.front();
  const std::string base = BaseName(o.path), holder = BaseName(m.holder->path);
  *f->proto().add_objects() = ctx.Describe(pi, *m.holder);
  f->Detail("needs", text::ShowBytes(NeedsText(g)));
  switch (m.cause) {
    case v1::CAUSE_CXX_ABI:
    case v1::CAUSE_HOST_VERSION: {
      const bool abi = m.cause == v1::CAUSE_CXX_ABI;
      f->Detail(text::ShowBytes(abi ? "host library" : "host library loaded"),
                text::ShowBytes(HolderText(ctx, pi, *m.holder, owners)));
      std::vector<std::string> near;
      for (const auto& n : m.near) near.push_back(n.demangled);
      const std::string more = g.size() > 1 ? fmt::format(", and so for {} more", g.size() - 1) : "";
      f->Detail("exported instead",
                text::Show("{} ({}){}", fmt::join(near, "; "),
                           abi ? "the same function in the other C++ ABI" : "the same name, other parameters", more));
      if (abi)
        f->Detail(
            "why",
            text::Show(
                "{} was compiled with _GLIBCXX_USE_CXX11_ABI={} and {} with _GLIBCXX_USE_CXX11_ABI={}: std::string "
                "and std::list are other types in each, so functions that take or return them have other symbol names",
                base, AbiOf(m.demangled), holder, AbiOf(m.near.front().demangled)));
      else
        f->Detail(
            "why",
            text::Show(
                "{} was compiled against the headers of another version of {}, where {} takes other parameters; a C++ "
                "symbol's name holds its parameter types",
                base, HostName(owners, *m.holder), elf::WithoutParameters(m.demangled)));
      break;
    }
    case v1::CAUSE_PYTHON_API: {
      f->Detail("interpreter", text::Show("{} ({}{})", NormalPath(m.holder->path), PythonWords(m),
                                          m.python_version_from.empty() ? "" : ", " + m.python_version_from));
      f->Detail(
          "why",
          text::Show(
              "{} {} Python/C API, which {} does not export: {} was built with another Python's headers{}",
              SymbolList(g), Is(g), PythonWords(m), base,
              base.find(".abi3.") != std::string::npos
                  ? " (an abi3 extension runs on the Python it was built with and later ones, not on earlier ones)"
                  : ""));
      break;
    }
    case v1::CAUSE_NOT_EXPORTED:
      f->Detail("defined in",
                text::Show("{}, {}", NormalPath(m.holder->path),
                           m.hidden_version.empty() ? "as a local symbol (its .symtab, not its .dynsym: the loader "
                                                      "does not see it)"
                                                    : "under a non-default version"));
      f->Detail("why", text::ShowBytes(NotExportedWhy(ctx, m)));
      break;
    default:
      break;
  }
  const auto& own = owners.Of(o.path);
  if (own && m.cause != v1::CAUSE_NOT_EXPORTED)
    f->Detail("installed by",
              text::Show("pip's {} ({}){}", PipLabel(own), own->dist_info,
                         own->tags.empty() ? "" : fmt::format(", wheel tag {}", fmt::join(own->tags, ", "))));
}

// An extension built for another CPython: the build for this interpreter's tag, or a rebuild
// with its headers.
void PythonFixes(const ProcessIndex& pi, const std::string& base, const Missing& m,
                 const std::optional<PipDistribution>& own, FindingBuilder* f) {
  const std::string exe =
      pi.p->has_python() && !pi.p->python().executable().empty() ? pi.p->python().executable() : pi.p->exe();
  const std::string tag = PythonTag(m.python_version);
  f->Fix(v1::FIX_INSTALL_FOR_PYTHON,
         own && !own->name.empty()
             ? text::Show("install the build of {} for this interpreter{}: {} -m pip install --no-cache-dir "
                          "--force-reinstall {}",
                          own->name, tag.empty() ? "" : " (tag " + tag + ")", text::ShellQuote(exe),
                          text::ShellQuote(own->version.empty() ? own->name : own->name + "==" + own->version))
             : text::Show("install a build of {} made for {}{}", base, PythonWords(m),
                          tag.empty() ? "" : " (" + tag + ")"));
  f->Fix(v1::FIX_REBUILD_FOR_PYTHON,
         text::Show("or rebuild {} with this interpreter's headers: {} -c "
                    "'import sysconfig; print(sysconfig.get_paths()[\"include\"])' prints their directory",
                    base, text::ShellQuote(exe)));
}

// Exporting the definition: how depends on why it is local.
void ExportFixes(Context& ctx, const std::string& base, const Group& g, FindingBuilder* f) {
  const Missing& m = *g.front();
  const std::string what = SymbolList(g), holder = BaseName(m.holder->path);
  if (!m.hidden_version.empty())
    f->Fix(v1::FIX_REPLACE_HOST,
           text::Show("use a {} that exports {} as its default version (the one {} was built against): "
                      "this one keeps it only as {}@{}, for objects linked against that version",
                      holder, m.name, base, m.name, m.hidden_version));
  else if (m.local_kind == elf::LocalKind::kFileLocal)
    f->Fix(v1::FIX_EXPORT_SYMBOL,
           text::Show("give {} external linkage in {} (not static) and rebuild {}", what, m.local_source, holder));
  else if (const elf::ElfInfo* e = ctx.File(m.holder->path); e != nullptr && !e->verdefs.empty())
    f->Fix(v1::FIX_EXPORT_SYMBOL,
           text::Show("export {} from {}: list it under global: in its version script (version {}), and "
                      "declare it __attribute__((visibility(\"default\"))) if it has hidden visibility; then "
                      "rebuild {}",
                      what, holder, e->verdefs.front(), holder));
  else
    f->Fix(v1::FIX_EXPORT_SYMBOL,
           text::Show("export {} from {}: declare it __attribute__((visibility(\"default\"))) (or list it "
                      "under global: if a version script made it local), then rebuild {}",
                      what, holder, holder));
}

void CauseFixes(Context& ctx, const ProcessIndex& pi, const Obj& o, const Group& g, PipOwners& owners,
                FindingBuilder* f) {
  const Missing& m = *g.front();
  const std::string base = BaseName(o.path), holder = BaseName(m.holder->path);
  const auto& own = owners.Of(o.path);
  const auto& host = owners.Of(m.holder->path);
  switch (m.cause) {
    case v1::CAUSE_CXX_ABI:
      f->Fix(v1::FIX_REBUILD_CXX_ABI,
             text::Show("rebuild {} with -D_GLIBCXX_USE_CXX11_ABI={}, the ABI {} was built with{}", base,
                        AbiOf(m.near.front().demangled), holder,
                        host && host->name == "torch" ? " (python -c 'import torch; "
                                                        "print(torch.compiled_with_cxx11_abi())' says which: "
                                                        "True is 1)"
                                                      : ""));
      f->Fix(v1::FIX_REPLACE_HOST, text::Show("or use a build of {} made with _GLIBCXX_USE_CXX11_ABI={}, as {} was",
                                              HostName(owners, *m.holder), AbiOf(m.demangled), base));
      break;
    case v1::CAUSE_HOST_VERSION: {
      const std::string what = HostName(owners, *m.holder);
      f->Fix(v1::FIX_REBUILD_AGAINST_HOST,
             text::Show("rebuild {} against the {} that is loaded ({}){}", base, what,
                        host ? PipLabel(host) : m.holder->path.str(),
                        own && !own->name.empty()
                            ? fmt::format(": pip install --no-build-isolation --no-binary {} --no-cache-dir "
                                          "--force-reinstall {}{}",
                                          own->name, own->name, own->version.empty() ? "" : "==" + own->version)
                            : ""));
      std::string pinned;
      if (own && host)
        for (const auto& r : own->requires_dist)
          if (r.rfind(host->name, 0) == 0 && r.find("==") != std::string::npos) pinned = r;
      f->Fix(v1::FIX_PIN_HOST,
             text::ShowBytes(
                 pinned.empty()
                     ? fmt::format("or install the version of {} that {} was built against", what, base)
                     : fmt::format("or install the {} that {} requires: pip install '{}'", what, base, pinned)));
      break;
    }
    case v1::CAUSE_PYTHON_API:
      PythonFixes(pi, base, m, own, f);
      break;
    case v1::CAUSE_NOT_EXPORTED:
      ExportFixes(ctx, base, g, f);
      break;
    default:
      break;
  }
}

void FindCauses(Context& ctx, const ProcessIndex& pi, const Obj& o, const std::vector<const Obj*>& scope,
                std::vector<Missing>* missing, CauseMemo* memo) {
  bool open = false;
  for (Missing& m : *missing) {
    if (!m.version_only) m.demangled = elf::Demangle(m.name);
    open |= Open(m);
  }
  if (!open) return;
  const std::vector<const Obj*> objs = Candidates(pi, o, scope);
  std::vector<const elf::ElfInfo*> files = {ctx.File(o.path)};
  for (const Obj* c : objs) files.push_back(ctx.File(c->path));
  auto [it, fresh] = memo->found.try_emplace(std::move(files));
  if (fresh) it->second = Read(ctx, objs, *missing);
  for (Missing& m : *missing) {
    auto f = it->second.find(m.name + '\0' + m.version);
    if (!Open(m) || f == it->second.end()) continue;
    m.cause = f->second.cause;
    m.holder = objs[f->second.holder];
    m.local_kind = f->second.local_kind;
    m.local_source = f->second.local_source;
    m.hidden_version = f->second.hidden_version;
    for (const auto& n : f->second.near) m.near.push_back({objs[n.object], n.name, n.demangled});
  }
  // The interpreter is the process's, not the scope's: asked each time (a cheap lookup).
  PythonApi(ctx, pi, missing);
}

}  // namespace ldscope::analysis
