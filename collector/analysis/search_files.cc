// Searches explained by the files they reached (docs/LOADER.md section 13):
// - a search that mapped nothing and ended at a file ld.so could not use: not a library
//   (a GNU ld script such as libgcc_s.so: NOT_A_LIBRARY), or a library it could not map
//   (MAP_FAILED: a noexec mount, which `run` records);
// - a search that found nothing while files of another ELF class or machine sat on its
//   path (INCOMPATIBLE_LIBRARY: found but unusable);
// - LD_PRELOAD entries ld.so ignored (PRELOAD_IGNORED);
// - empty elements of LD_LIBRARY_PATH, RPATH or RUNPATH, which glibc takes as the
//   current directory (EMPTY_PATH_ELEMENT).
// Files are judged as ld.so's open_verify judges them (loader::Judge), read now (the
// loader model's cache); a file that is not there now is not judged.
#include <elf.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/env_change.h"
#include "analysis/families.h"
#include "render/python_text.h"
#include "render/words.h"
#include "text/escape.h"

namespace ldscope::analysis {
namespace {

std::string Join(const std::vector<std::string>& v, const char* sep = ", ") {
  return fmt::format("{}", fmt::join(v, sep));
}

// A candidate as ld.so opened it: relative ones (an empty or relative element) in the
// process's working directory.
std::string Absolute(const ProcessIndex& pi, const std::string& c) {
  if (c.empty() || c.front() == '/' || pi.p->cwd().empty()) return c;
  return NormalPath(pi.p->cwd() + "/" + c);
}

// ---- GNU ld scripts ----

// The files a GNU ld script's GROUP and INPUT commands name (AS_NEEDED members
// included, -l options and static archives left out): what the link editor would have
// linked, in order.
std::vector<std::string> ScriptMembers(const std::string& text) {
  std::string t;
  for (size_t i = 0; i < text.size(); ++i) {  // comments out
    if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      if (end == std::string::npos) break;
      i = end + 1;
      t += ' ';
    } else {
      t += text[i] == '(' || text[i] == ')' || text[i] == ',' ? ' ' : text[i];
      if (text[i] == '(' || text[i] == ')') t += text[i] == '(' ? "( " : ") ";
    }
  }
  std::vector<std::string> words, out;
  for (size_t i = 0; i < t.size();) {
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    size_t j = i;
    while (j < t.size() && !std::isspace(static_cast<unsigned char>(t[j]))) ++j;
    if (j > i) words.push_back(t.substr(i, j - i));
    i = j;
  }
  int depth = 0;
  bool in_files = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "(") {
      ++depth;
    } else if (w == ")") {
      if (--depth <= 0) in_files = false;
    } else if ((w == "GROUP" || w == "INPUT") && depth == 0) {
      in_files = true;
    } else if (in_files && w != "AS_NEEDED" && w.rfind("-l", 0) != 0 &&
               (w.size() < 2 || w.compare(w.size() - 2, 2, ".a") != 0)) {
      out.push_back(w);
    }
  }
  return out;
}

bool IsLinkerScript(const std::string& head) {
  return head.find("GNU ld script") != std::string::npos || !ScriptMembers(head).empty();
}

// The first bytes of a script, on one line, for a detail.
std::string ScriptText(const std::string& head) {
  std::string one;
  for (char c : head.substr(0, 400)) one += c == '\n' || c == '\t' ? ' ' : c;
  while (one.find("  ") != std::string::npos) one.replace(one.find("  "), 2, " ");
  while (!one.empty() && one.back() == ' ') one.pop_back();
  return one;
}

// What the files a search reached say about its failure.
struct FileStory {
  // kUnknown: the search ended at a loadable file and mapped nothing, with no noexec
  // mount recorded for it: that is also what an RTLD_NOLOAD probe, or a file that is
  // an object already loaded under another name, leaves in a trace.
  enum Kind { kNone, kNotLibrary, kMapFailed, kIncompatible, kUnknown } kind = kNone;
  std::string file;  // kNotLibrary, kMapFailed: where it ended
  v1::CandidateStep step = v1::STEP_UNKNOWN;
  elf::Ident ident;                                         // of file
  const v1::Mount* mount = nullptr;                         // kMapFailed: the noexec mount recorded for it
  std::vector<std::pair<std::string, elf::Ident>> skipped;  // another class or machine
  v1::FindingKind Finding() const {
    return kind == kNotLibrary ? v1::NOT_A_LIBRARY : kind == kMapFailed ? v1::MAP_FAILED : v1::INCOMPATIBLE_LIBRARY;
  }
};

// The noexec mount `run` recorded for a file's directory (nullptr: none).
const v1::Mount* NoexecMountOf(const Context& ctx, const std::string& file) {
  const std::string dir = DirName(file);
  for (const auto& m : ctx.timeline().noexec_mounts())
    for (const auto& d : m.dirs())
      if (NormalPath(d) == dir) return &m;
  return nullptr;
}

FileStory Story(const Context& ctx, const ProcessIndex& pi, const v1::SearchResult& s) {
  FileStory st;
  for (const auto& c : s.tried()) {
    const std::string p = Absolute(pi, c.path());
    const elf::Ident& id = loader::IdentOf(p, pi.env);
    const loader::Verdict v = loader::Judge(id, pi.env.machine);
    if (v == loader::Verdict::kOtherClass || v == loader::Verdict::kOtherMachine) st.skipped.emplace_back(p, id);
    if (&c != &s.tried(s.tried_size() - 1)) continue;
    // The search ended at its last candidate: a file ld.so failed on, or one it opened
    // and could not map (nothing was loaded).
    if (v == loader::Verdict::kStop || v == loader::Verdict::kUse) {
      st.file = p;
      st.step = c.step();
      st.ident = id;
      st.mount = NoexecMountOf(ctx, p);
      st.kind = v == loader::Verdict::kStop ? FileStory::kNotLibrary
                : st.mount != nullptr       ? FileStory::kMapFailed
                                            : FileStory::kUnknown;
      return st;
    }
  }
  if (!st.skipped.empty()) st.kind = FileStory::kIncompatible;
  return st;
}

class Pass {
 public:
  Pass(Context& ctx, v1::Report* out) : ctx_(ctx), out_(out) {}

  void Run() {
    for (const auto& pi : ctx_.processes()) {
      for (size_t i = 0; i < pi.entries.size(); ++i)
        if (pi.entries[i]->has_search()) Search(pi, *pi.entries[i], i < pi.before_first_dlopen);
      Preloads(pi);
      EmptyElements(pi);
    }
  }

 private:
  // ---- A search that mapped nothing ----

  // The searching object, when the search is one this pass explains (nullptr: not).
  const Obj* Requester(const ProcessIndex& pi, const v1::SearchResult& s) const {
    if (s.has_same_as() || s.tried_size() == 0 || s.outcome().rfind("unknown", 0) == 0) return nullptr;
    auto it = pi.objects.find(s.requester().id());
    return it == pi.objects.end() ? nullptr : &it->second;
  }

  void Search(const ProcessIndex& pi, const v1::Entry& e, bool before_dlopen) {
    const v1::SearchResult& s = e.search();
    const Obj* r = Requester(pi, s);
    if (r == nullptr || PreloadSearch(pi, *r, s.requested_name(), e.seq())) return;
    const FileStory story = Story(ctx_, pi, s);
    if (story.kind == FileStory::kNone || story.kind == FileStory::kUnknown) return;
    const bool needed = r->load != nullptr && std::find(r->load->needed().begin(), r->load->needed().end(),
                                                        s.requested_name()) != r->load->needed().end();
    // A NEEDED of start-up that nothing answered stops the program (exit 127).
    const bool startup = needed && before_dlopen && !pi.p->exited() && BoundFor(pi, *r, s.requested_name()) == nullptr;
    FindingBuilder f(pi, story.Finding(), startup ? v1::ERROR : v1::WARNING);
    *f.proto().add_objects() = ctx_.Describe(pi, *r);
    f.proto().add_evidence(e.seq());
    const std::string what = startup ? fmt::format("{} cannot start: {}, needed by {},", BaseName(pi.p->exe()),
                                                   s.requested_name(), BaseName(r->path))
                             : needed
                                 ? fmt::format("{}'s NEEDED {} failed:", BaseName(r->path), s.requested_name())
                                 : fmt::format("dlopen of {} from {} failed:", s.requested_name(), BaseName(r->path));
    const std::string py = render::PyCauseText(s.python(), pi.p->cwd());
    f.Detail("requested by", text::Show("{}, loaded {}{}", NormalPath(r->path), ctx_.HowLoaded(pi, *r),
                                        py.empty() ? "" : ", for " + py));
    Tell(pi, *r, s, story, what, &f);
    std::move(f).AddTo(out_);
  }

  void Tell(const ProcessIndex& pi, const Obj& r, const v1::SearchResult& s, const FileStory& st,
            const std::string& what, FindingBuilder* f) {
    switch (st.kind) {
      case FileStory::kNotLibrary:
        return NotLibrary(pi, r, s, st, what, f);
      case FileStory::kMapFailed:
        return MapFailed(st, what, f);
      case FileStory::kIncompatible:
        return Incompatible(pi, r, s, st, what, f);
      default:
        return;
    }
  }

  // "ELFCLASS32 (i386)", "AArch64": what a skipped file is.
  static std::string Foreign(const elf::Ident& id) {
    if (id.elf_class == ELFCLASS32) return fmt::format("ELFCLASS32 ({}), a 32-bit build", elf::MachineWord(id.machine));
    return fmt::format("{}, a build for another machine", elf::MachineWord(id.machine));
  }

  // "found via LD_LIBRARY_PATH", "opened by its path".
  static std::string StepText(const ProcessIndex& pi, const v1::SearchResult& s, const std::string& file) {
    for (const auto& c : s.tried())
      if (Absolute(pi, c.path()) == file)
        return c.step() == v1::STEP_AS_GIVEN ? "opened by its path" : "found via " + render::CandidateWord(c);
    return "";
  }

  void Incompatible(const ProcessIndex& pi, const Obj& r, const v1::SearchResult& s, const FileStory& st,
                    const std::string& what, FindingBuilder* f) {
    const std::string name = s.requested_name();
    const bool other_class = std::any_of(st.skipped.begin(), st.skipped.end(),
                                         [](const auto& k) { return k.second.elf_class == ELFCLASS32; });
    const std::string host = elf::MachineWord(pi.env.machine != 0 ? pi.env.machine : elf::HostMachine());
    f->Headline(text::Show(
        "{} found only as {}: unusable in this 64-bit {} process", what,
        st.skipped.size() == 1 ? Foreign(st.skipped[0].second) : "builds for another class or machine", host));
    const bool by_path = name.find('/') != std::string::npos;
    for (const auto& [p, id] : st.skipped)
      f->Detail("unusable", text::Show("{} ({}): {}; ld.so {}", p, StepText(pi, s, p), Foreign(id),
                                       by_path ? "treats it as absent" : "skips it and searches on"));
    f->Detail("loader said",
              text::ShowBytes(other_class ? fmt::format("{}: wrong ELF class: ELFCLASS32", name)
                                          : fmt::format("{}: cannot open shared object file: No such file or "
                                                        "directory (a file for another machine is skipped as "
                                                        "if it were not there)",
                                                        name)));
    const bool needed = r.load != nullptr &&
                        std::find(r.load->needed().begin(), r.load->needed().end(), name) != r.load->needed().end();
    if (!by_path) AddSearchDetails(ctx_, pi, r, name, &s, /*dlopen=*/!needed, f);
    f->Fix(v1::FIX_INSTALL, text::Show("install a 64-bit {} build of {} and put it where {} is now{}", host,
                                       BaseName(st.skipped[0].first), st.skipped[0].first,
                                       by_path ? ", or open that build's path" : ", or on the search path before it"));
    f->Fix(v1::FIX_RUN_MATCHING_PROGRAM, text::Show("or, if the {} build is the one you want, run a program "
                                                    "built for it: this process is 64-bit {}",
                                                    elf::MachineWord(st.skipped[0].second.machine), host));
  }

  void MapFailed(const FileStory& st, const std::string& what, FindingBuilder* f) {
    const v1::Mount& m = *st.mount;
    f->Headline(text::Show("{} {} lies on a noexec mount ({})", what, st.file, m.mount_point()));
    f->Detail("could not map", text::Show("{}: ld.so opened it and could not map its code: failed to map "
                                          "segment from shared object",
                                          st.file));
    f->Detail("mount", text::Show("{} ({} from {}, options {}): noexec forbids executable mappings of its "
                                  "files (recorded when the trace was taken)",
                                  m.mount_point(), m.fs_type(), m.source(), m.options()));
    f->Fix(v1::FIX_SET_VARIABLE,
           text::Show("if the program unpacks {} into a temporary directory (snappy-java, JNA, lavaplayer and "
                      "PyInstaller do), give it one on a mount without noexec: TMPDIR=/var/tmp, or for Java "
                      "-Djava.io.tmpdir=/var/tmp",
                      BaseName(st.file)),
           "TMPDIR", "/var/tmp");
    f->Fix(v1::FIX_REMOUNT, text::Show("or remount {} without noexec: mount -o remount,exec {}", m.mount_point(),
                                       text::ShellQuote(m.mount_point())));
    f->Fix(v1::FIX_MOVE, text::Show("or move {} to a directory on another mount", st.file));
  }

  void NotLibrary(const ProcessIndex& pi, const Obj& r, const v1::SearchResult& s, const FileStory& st,
                  const std::string& what, FindingBuilder* f) {
    const std::string err = loader::StopError(st.ident);
    const bool script = !st.ident.head.empty() && IsLinkerScript(st.ident.head);
    f->Headline(text::Show("{} {} is {}", what, st.file,
                           script ? "a GNU ld script, not a library" : "not a library (" + err + ")"));
    f->Detail("stopped at", text::Show("{} ({}): ld.so reads it as an ELF object, fails with \"{}\" and "
                                       "searches no further",
                                       st.file, StepText(pi, s, st.file), err));
    if (!script) {
      f->Fix(v1::FIX_REMOVE, text::Show("remove or rename {}, which is not a shared library", st.file));
      return;
    }
    const std::string real = ScriptDetails(pi, r, st.ident, f);
    if (!real.empty())
      f->Fix(v1::FIX_LOAD_BY_PATH,
             text::Show(
                 "dlopen {} (the library the script names) instead of {}{}", real, s.requested_name(),
                 s.python().dlopen_call().empty() ? "" : text::Show(": ctypes.CDLL({})", text::PythonString(real))));
    if (st.step == v1::STEP_LD_LIBRARY_PATH)
      f->Fix(v1::FIX_DROP_FROM_LD_LIBRARY_PATH,
             text::Show("or take {} off LD_LIBRARY_PATH: it holds link-time files", DirName(st.file)));
  }

  // The script, why the loader cannot use it, and the files it names as r's search finds
  // them; returns the first member that search finds ("" when none).
  std::string ScriptDetails(const ProcessIndex& pi, const Obj& r, const elf::Ident& id, FindingBuilder* f) {
    f->Detail("script", text::ShowBytes(ScriptText(id.head)));
    f->Detail("why",
              "a GNU ld script tells the link editor (ld -l...) which files to link; the dynamic "
              "loader reads only ELF objects");
    std::vector<std::string> shown;
    std::string real;
    for (const auto& m : ScriptMembers(id.head)) {
      const loader::Result got =
          loader::Search(m, pi.AsRequester(r, ctx_.files()), pi.LoaderChain(r, ctx_.files()), pi.env);
      shown.push_back(got.path.empty() ? m + " (not found)" : m == got.path ? m : fmt::format("{} ({})", m, got.path));
      if (real.empty() && !got.path.empty()) real = m;
    }
    if (!shown.empty()) f->Detail("points to", text::ShowBytes(Join(shown)));
    return real;
  }

  // ---- LD_PRELOAD ----

  // The entries of LD_PRELOAD as ld.so splits them (handle_preload_list in rtld.c: at
  // ' ' and ':').
  static std::vector<std::string> PreloadEntries(const ProcessIndex& pi) {
    return loader::SplitPath(EnvOf(*pi.p, "LD_PRELOAD"), " :");
  }

  // Whether the search of name by r at seq is that of an LD_PRELOAD entry (the
  // executable's searches before its NEEDED closure).
  bool PreloadSearch(const ProcessIndex& pi, const Obj& r, const std::string& name, uint64_t seq) const {
    if (r.load == nullptr || r.load->reason() != v1::LOAD_EXECUTABLE) return false;
    const auto entries = PreloadEntries(pi);
    if (std::find(entries.begin(), entries.end(), name) == entries.end()) return false;
    for (const auto& [id, o] : pi.objects)
      if (o.open_seq < seq && o.load != nullptr && o.load->reason() == v1::LOAD_NEEDED) return false;
    return true;
  }

  void Preloads(const ProcessIndex& pi) {
    if (pi.p->start_reason() == v1::START_FORK || pi.exe == nullptr) return;
    for (const std::string& entry : PreloadEntries(pi)) {
      bool loaded = false;
      for (const auto& [id, o] : pi.objects)
        loaded |= o.load != nullptr && o.load->reason() == v1::LOAD_PRELOAD && o.load->requested_name() == entry;
      if (loaded) continue;
      for (const v1::Entry* e : pi.entries)
        if (e->has_search() && e->search().requested_name() == entry && Requester(pi, e->search()) == pi.exe &&
            PreloadSearch(pi, *pi.exe, entry, e->seq())) {
          Preload(pi, *e, entry);
          break;
        }
    }
  }

  void Preload(const ProcessIndex& pi, const v1::Entry& e, const std::string& entry) {
    const v1::SearchResult& s = e.search();
    const FileStory st = Story(ctx_, pi, s);
    if (st.kind == FileStory::kUnknown) return;  // perhaps ld.so itself by another name: no error then
    std::string why = "cannot open shared object file";
    if (st.kind == FileStory::kNotLibrary) why = loader::StopError(st.ident);
    if (st.kind == FileStory::kMapFailed) why = "failed to map segment from shared object";
    if (st.kind == FileStory::kIncompatible && st.skipped.front().second.elf_class == ELFCLASS32)
      why = "wrong ELF class: ELFCLASS32";
    const std::string program = BaseName(pi.p->exe());
    FindingBuilder f(pi, v1::PRELOAD_IGNORED, v1::WARNING);
    *f.proto().add_objects() = ctx_.Describe(pi, *pi.exe);
    f.proto().add_evidence(e.seq());
    const bool script = st.kind == FileStory::kNotLibrary && IsLinkerScript(st.ident.head);
    const std::string reason = st.kind == FileStory::kNone           ? "not found"
                               : st.kind == FileStory::kIncompatible ? "found only as " + Foreign(st.skipped[0].second)
                               : st.kind == FileStory::kMapFailed    ? st.file + " could not be mapped"
                               : script                              ? st.file + " is a GNU ld script, not a library"
                                                                     : st.file + " is not a library";
    f.Headline(text::Show("LD_PRELOAD entry {} was ignored: {}", entry, reason));
    f.Detail("LD_PRELOAD", text::ShowBytes(EnvOf(*pi.p, "LD_PRELOAD")));
    f.Detail("loader said", text::Show("ERROR: ld.so: object '{}' from LD_PRELOAD cannot be preloaded "
                                       "({}): ignored.",
                                       entry, why));
    f.Detail("effect", text::Show("{} ran without it: nothing it would interpose (an allocator, a "
                                  "profiler) is in effect",
                                  program));
    for (const auto& [p, id] : st.skipped) f.Detail("unusable", text::Show("{}: {}", p, Foreign(id)));
    if (st.kind == FileStory::kNotLibrary || st.kind == FileStory::kMapFailed)
      f.Detail("stopped at", text::Show("{}: {}", st.file, why));
    const std::string real = script ? ScriptDetails(pi, *pi.exe, st.ident, &f) : "";
    if (entry.find('/') == std::string::npos) AddSearchDetails(ctx_, pi, *pi.exe, entry, &s, /*dlopen=*/false, &f);
    const std::string host = elf::MachineWord(pi.env.machine != 0 ? pi.env.machine : elf::HostMachine());
    // The script's library in the entry's place: LD_PRELOAD's new value.
    std::vector<std::string> with_real;
    bool replaced = false;
    for (const auto& e : loader::SplitPath(EnvOf(*pi.p, "LD_PRELOAD"), ": ")) {
      replaced |= e == entry;
      with_real.push_back(e == entry ? real : e);
    }
    const std::string text =
        st.kind == FileStory::kIncompatible ? fmt::format(
                                                  "give LD_PRELOAD the full path of a 64-bit {} build "
                                                  "instead",
                                                  host)
        : !real.empty() ? fmt::format("give LD_PRELOAD the library the script names instead: {}", real)
        : st.kind == FileStory::kMapFailed
            ? "give LD_PRELOAD the full path of a copy on a mount without noexec"
            : fmt::format(
                  "give LD_PRELOAD the full path of the library (a bare name is searched like a NEEDED "
                  "of {}: RPATH, LD_LIBRARY_PATH, ld.so.cache, default directories)",
                  program);
    if (st.kind != FileStory::kIncompatible && !real.empty() && replaced)
      f.Fix(v1::FIX_PRELOAD_BY_PATH, text::ShowBytes(text), "LD_PRELOAD", Join(with_real, ":"));
    else
      f.Fix(v1::FIX_PRELOAD_BY_PATH, text::ShowBytes(text));
    bool dropped = false;
    const std::string kept = LdPreloadWithout(pi, entry, &dropped);
    if (dropped)
      f.Fix(v1::FIX_DROP_FROM_LD_PRELOAD, text::Show("or remove {} from LD_PRELOAD", entry), "LD_PRELOAD", kept);
    else
      f.Fix(v1::FIX_DROP_FROM_LD_PRELOAD, text::Show("or remove {} from LD_PRELOAD", entry));
    std::move(f).AddTo(out_);
  }

  // ---- Empty elements: the current directory ----

  // Whether a candidate path came from an empty element: the bare name, or the name
  // under one of the hwcaps subdirectories, relative.
  static bool FromCwd(const ProcessIndex& pi, const std::string& candidate, const std::string& name) {
    if (candidate == name) return true;
    for (const auto& sub : pi.p->hwcaps_subdirs())
      if (candidate == sub + "/" + name) return true;
    return false;
  }

  void EmptyElements(const ProcessIndex& pi) {
    if (pi.p->start_reason() == v1::START_FORK) return;
    const std::string llp = EnvOf(*pi.p, "LD_LIBRARY_PATH");
    if (!loader::EmptyElements(llp).empty()) EmptyInLibraryPath(pi, llp);
    std::vector<std::string> told;
    for (const auto& [id, o] : pi.objects) {
      if (o.load == nullptr) continue;
      for (const std::string* list : {&o.load->rpath(), &o.load->runpath()})
        if (!loader::EmptyElements(*list, ":").empty() &&
            std::find(told.begin(), told.end(), o.path.str()) == told.end()) {
          told.push_back(o.path);
          EmptyInDynamic(pi, o, list == &o.load->rpath() ? v1::STEP_RPATH : v1::STEP_RUNPATH, *list);
        }
    }
  }

  // Objects the process loaded from its working directory through a step of the search.
  std::vector<const Obj*> FoundInCwd(const ProcessIndex& pi, v1::CandidateStep step, const Obj* owner) const {
    std::vector<const Obj*> out;
    for (const auto& [id, o] : pi.objects) {
      if (o.load == nullptr || o.load->tried_size() == 0 || render::FoundBy(*o.load) != step) continue;
      if (owner != nullptr && o.requester != owner->id) continue;
      if (FromCwd(pi, o.load->tried(o.load->tried_size() - 1).path(), o.load->requested_name())) out.push_back(&o);
    }
    return out;
  }

  // The list with each empty element shown: ":/opt/x" -> "(empty):/opt/x".
  static std::string Marked(const std::string& list, const char* seps) {
    std::vector<std::string> parts = loader::SplitSearchPath(list, seps);
    for (auto& p : parts)
      if (p.empty()) p = "(empty)";
    return Join(parts, ":");
  }
  static std::string WithoutEmpty(const std::string& list, const char* seps) {
    return Join(loader::SplitPath(list, seps), ":");
  }

  void EmptyInLibraryPath(const ProcessIndex& pi, const std::string& llp) {
    FindingBuilder f(pi, v1::EMPTY_PATH_ELEMENT, v1::WARNING);
    const std::vector<const Obj*> found = FoundInCwd(pi, v1::STEP_LD_LIBRARY_PATH, nullptr);
    const std::string cwd = found.empty() ? pi.p->cwd() : DirName(found.front()->path);
    const std::vector<size_t> empty = loader::EmptyElements(llp);
    f.Headline(text::ShowBytes(
        found.empty() ? fmt::format("LD_LIBRARY_PATH has an empty element: ld.so searches the current directory ({}) "
                                    "for every library",
                                    cwd)
                      : fmt::format("{} was loaded from the current directory ({}) through an empty element of "
                                    "LD_LIBRARY_PATH",
                                    BaseName(found.front()->path), cwd)));
    for (const Obj* o : found) {
      *f.proto().add_objects() = ctx_.Describe(pi, *o);
      f.proto().add_evidence(o->open_seq);
    }
    f.Detail("LD_LIBRARY_PATH", text::Show("{} (element {} of {} is empty)", Marked(llp, ":;"), empty.front() + 1,
                                           loader::SplitSearchPath(llp).size()));
    f.Detail("meant", text::Show("the current directory, {} (glibc takes an empty element as the "
                                 "directory of length 0: the working directory of each search)",
                                 cwd));
    for (const Obj* o : found)
      f.Detail("found there", text::Show("{}, loaded {}", NormalPath(o->path), ctx_.HowLoaded(pi, *o)));
    f.Detail("hazard",
             "a file named like a library in whatever directory the program runs in is loaded "
             "before the other directories: a directory it is started in can run code in it");
    const std::string fixed = WithoutEmpty(llp, ":;");
    f.Fix(v1::FIX_SET_VARIABLE,
          fixed.empty()
              ? text::Shown("unset LD_LIBRARY_PATH (it names no directory)")
              : text::Show("LD_LIBRARY_PATH={} (the same without the empty element)", text::ShellQuote(fixed)),
          "LD_LIBRARY_PATH", fixed);
    f.Fix(v1::FIX_SET_VARIABLE,
          "and append without making one: export LD_LIBRARY_PATH="
          "\"${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/new/dir\"");
    std::move(f).AddTo(out_);
  }

  // An object's own list is its vendor's: a warning only where a library came from the
  // working directory through it, else information (LD_LIBRARY_PATH, which the user
  // sets, is always a warning).
  void EmptyInDynamic(const ProcessIndex& pi, const Obj& o, v1::CandidateStep step, const std::string& list) {
    const bool rpath = step == v1::STEP_RPATH;
    const char* tag = render::StepWord(step);
    const std::vector<const Obj*> found = FoundInCwd(pi, step, &o);
    FindingBuilder f(pi, v1::EMPTY_PATH_ELEMENT, found.empty() ? v1::INFO : v1::WARNING);
    const std::string cwd = found.empty() ? pi.p->cwd() : DirName(found.front()->path);
    *f.proto().add_objects() = ctx_.Describe(pi, o);
    f.proto().add_evidence(o.open_seq);
    f.Headline(
        text::Show("{}'s {} has an empty element: ld.so searches the current directory ({}) for its "
                   "libraries",
                   BaseName(o.path), tag, cwd));
    for (const Obj* x : found) {
      *f.proto().add_objects() = ctx_.Describe(pi, *x);
      f.proto().add_evidence(x->open_seq);
    }
    f.Detail(text::ShowBytes(tag), text::Show("{} of {}", Marked(list, ":"), NormalPath(o.path)));
    f.Detail("meant", text::Show("the current directory, {} (an empty element is the directory of length "
                                 "0; $ORIGIN would be the object's own)",
                                 cwd));
    for (const Obj* x : found)
      f.Detail("found there", text::Show("{}, loaded {}", NormalPath(x->path), ctx_.HowLoaded(pi, *x)));
    f.Detail("hazard",
             "a file named like a library in the directory the program runs in is loaded "
             "first: a directory it is started in can run code in it");
    const std::string fixed = WithoutEmpty(list, ":");
    const text::Shown file = text::ShellQuote(NormalPath(o.path));
    f.Fix(v1::FIX_SET_RPATH, fixed.empty() ? text::Show("patchelf --remove-rpath {}", file)
                                           : text::Show("patchelf {}--set-rpath {} {}", rpath ? "--force-rpath " : "",
                                                        text::ShellQuote(fixed), file));
    std::move(f).AddTo(out_);
  }

  Context& ctx_;
  v1::Report* out_;
};

}  // namespace

bool ExplainedBySearchFiles(const Context& ctx, const ProcessIndex& pi, const v1::SearchResult& s) {
  const FileStory::Kind k = Story(ctx, pi, s).kind;
  return k != FileStory::kNone && k != FileStory::kUnknown;
}

void FindSearchFiles(Context& ctx, v1::Report* out) { Pass(ctx, out).Run(); }

}  // namespace ldscope::analysis
