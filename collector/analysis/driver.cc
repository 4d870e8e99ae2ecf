// The analysis driver: the passes of the registry (registry.h) over one context, then
// the findings one explains that another tells again dropped, and the notes.
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/finding_builder.h"
#include "analysis/registry.h"
#include "text/strings.h"
#include "text/timer.h"

namespace ldscope::analysis {
namespace {

// Findings rest on files read now; say so when a file is not what was traced.
void NoteChangedFiles(Context& ctx, v1::Report* out) {
  // Asked once per path, device, inode and build-id (a churn's million objects are a few
  // files); counted and listed once per path.
  std::map<std::tuple<const std::string*, uint64_t, uint64_t, const std::string*>, bool> asked;
  std::vector<const std::string*> changed_paths;
  std::vector<std::string> changed_list;
  for (const auto& pi : ctx.processes()) {
    for (const auto& [id, o] : pi.objects) {
      if (o.dev == 0 || o.path.empty() || o.path.front() != '/') continue;
      auto [it, fresh] = asked.try_emplace({&o.path.str(), o.dev, o.ino, &o.build_id.str()}, false);
      if (!fresh) continue;
      const elf::ElfInfo* e = ctx.File(o.path);
      if (e == nullptr) continue;
      const bool moved = e->dev != o.dev || e->ino != o.ino;
      const bool rebuilt = !o.build_id.empty() && !e->build_id.empty() && text::Hex(e->build_id) != o.build_id;
      if ((moved || rebuilt) &&
          std::find(changed_paths.begin(), changed_paths.end(), &o.path.str()) == changed_paths.end()) {
        changed_paths.push_back(&o.path.str());
        if (changed_list.size() < 3)
          changed_list.push_back(fmt::format("{} ({})", o.path, rebuilt ? "different build-id" : "different inode"));
      }
    }
  }
  const size_t changed = changed_paths.size();
  if (changed > 0)
    out->add_notes(text::Show("{} file{} changed since the trace was taken, and findings about "
                              "them use the files as they are now: {}{}",
                              changed, changed == 1 ? "" : "s", fmt::join(changed_list, ", "),
                              changed > 3 ? ", ..." : "")
                       .str());
  // Files no longer the ones traced, answered from the facts the trace recorded: the
  // findings are about the traced files, which a fix on this machine may not meet.
  const auto& from_trace = ctx.files().changed();
  if (!from_trace.empty()) {
    std::vector<std::string> list;
    for (const auto& [path, how] : from_trace)
      if (list.size() < 3) list.push_back(fmt::format("{} ({})", path, how));
    out->add_notes(text::Show("{} file{} changed since the trace was taken; findings about them use "
                              "the ELF facts the trace recorded: {}{}",
                              from_trace.size(), from_trace.size() == 1 ? "" : "s", fmt::join(list, ", "),
                              from_trace.size() > 3 ? ", ..." : "")
                       .str());
  }
  // Unreadable files (a trace analysed on another machine, say): one note, not one each
  // (made of the reader's errors: text).
  if (std::string note = UnreadableFilesNote(ctx.files()); !note.empty()) out->add_notes(note);
  std::sort(out->mutable_notes()->begin(), out->mutable_notes()->end());
  out->mutable_notes()->erase(std::unique(out->mutable_notes()->begin(), out->mutable_notes()->end()),
                              out->mutable_notes()->end());
}

// A snapshot of a running process (`ldscope snapshot`) knows what is loaded, not how it
// came to be: say what its findings cannot rest on, once per trace.
void NoteSnapshots(const Context& ctx, v1::Report* out) {
  size_t n = 0, static_n = 0;
  std::vector<std::string> notes;
  for (const auto& pi : ctx.processes()) {
    if (pi.p->start_reason() != v1::START_SNAPSHOT) continue;
    ++n;
    if (pi.p->snapshot().statically_linked()) {
      ++static_n;
      out->add_notes(text::Show("pid {} ({}) is statically linked: it has no dynamic loader and no link map, so "
                                "the snapshot lists no library",
                                pi.p->pid(), pi.p->exe())
                         .str());
    }
    for (const auto& note : pi.p->snapshot().notes())
      out->add_notes(text::Show("pid {} ({}): {}", pi.p->pid(), pi.p->exe(), note).str());
  }
  if (n > static_n)
    out->add_notes(fmt::format(
        "{} snapshot{} of running processes: which search step found each library, how libraries loaded after "
        "start-up were loaded (dlopen and its mode, or as a dependency) and what failed before the snapshot are not "
        "known, so findings that need them (shadowing, fall-through, failed dlopens, missing libraries) are not made",
        n - static_n, n - static_n == 1 ? " is" : "s are"));
}

// A missing-symbol finding about a NEEDED that was shadowed (by an earlier object or by
// LD_LIBRARY_PATH) already tells that story: one paragraph per problem.
void DropShadowingExplainedByMissingSymbols(v1::Report* r) {
  std::vector<std::pair<uint32_t, std::string>> explained;  // (stream, bound_to path)
  for (const auto& f : r->findings())
    if (f.kind() == v1::MISSING_SYMBOL)
      for (const auto& m : f.missing())
        if (!m.bound_to().empty()) explained.push_back({f.stream(), NormalPath(m.bound_to())});
  auto* fs = r->mutable_findings();
  fs->erase(std::remove_if(fs->begin(), fs->end(),
                           [&](const v1::Finding& f) {
                             if ((f.kind() != v1::SHADOWED_DEPENDENCY &&
                                  f.kind() != v1::SEARCH_ORDER_SHADOWING) ||
                                 f.objects_size() == 0)
                               return false;
                             return std::find(explained.begin(), explained.end(),
                                              std::make_pair(f.stream(), f.objects(0).path())) !=
                                    explained.end();
                           }),
            fs->end());
}

// A fall-through error names the copy that was bound and the directories that should
// have held another: the missing-symbol finding about the same requester and copy would
// tell the same failure again.
void DropMissingExplainedByFallThrough(v1::Report* r) {
  std::vector<std::tuple<uint32_t, std::string, std::string>> explained;  // (stream, requester, bound)
  for (const auto& f : r->findings())
    if (f.kind() == v1::FALL_THROUGH && f.severity() == v1::ERROR && f.objects_size() >= 2)
      explained.emplace_back(f.stream(), f.objects(0).path(), f.objects(1).path());
  auto* fs = r->mutable_findings();
  fs->erase(std::remove_if(fs->begin(), fs->end(),
                           [&](const v1::Finding& f) {
                             if (f.kind() != v1::MISSING_SYMBOL || f.missing_size() == 0) return false;
                             for (const auto& m : f.missing())
                               if (std::find(explained.begin(), explained.end(),
                                             std::make_tuple(f.stream(), NormalPath(m.needed_by()),
                                                             NormalPath(m.bound_to()))) == explained.end())
                                 return false;
                             return true;
                           }),
            fs->end());
}

// A rejected plugin, an out-of-scope symbol or a newer glibc's version node lists the
// requirements it explains: the missing-symbol finding about the same object would tell
// the same failure again.
void DropMissingExplainedByFailedDlopen(v1::Report* r) {
  std::vector<std::tuple<uint32_t, std::string, std::string, std::string>> explained;  // stream, object, name, version
  for (const auto& f : r->findings())
    if (f.kind() == v1::DLOPEN_REJECTED || f.kind() == v1::DLOPEN_OUT_OF_SCOPE || f.kind() == v1::NEEDS_NEWER_GLIBC)
      for (const auto& m : f.missing())
        explained.emplace_back(f.stream(), NormalPath(m.needed_by()), m.name(), m.version());
  if (explained.empty()) return;
  auto* fs = r->mutable_findings();
  fs->erase(std::remove_if(fs->begin(), fs->end(),
                           [&](const v1::Finding& f) {
                             if (f.kind() != v1::MISSING_SYMBOL || f.severity() != v1::ERROR ||
                                 f.missing_size() == 0)
                               return false;
                             for (const auto& m : f.missing())
                               if (std::find(explained.begin(), explained.end(),
                                             std::make_tuple(f.stream(), NormalPath(m.needed_by()), m.name(),
                                                             m.version())) == explained.end())
                                 return false;
                             return true;
                           }),
            fs->end());
}

// The same information in several processes (each of a shell script's commands probing
// for the same plugin) is one finding that lists the processes: the first one's, with
// the others' pids. Warnings and errors stay one per process: each is its own failure.
void FoldInfoAcrossProcesses(v1::Report* r) {
  const auto key = [](const v1::Finding& f) {
    std::string k = fmt::format("{}\n{}\n{}", static_cast<int>(f.kind()), f.exe(), f.headline());
    for (const auto& d : f.details()) k += fmt::format("\n{}: {}", d.label(), d.text());
    for (const auto& x : f.fixes()) k += fmt::format("\nfix {}: {}", static_cast<int>(x.action()), x.text());
    return k;
  };
  auto* fs = r->mutable_findings();
  std::map<std::string, int> first;  // key -> index of the kept finding
  std::map<int, std::vector<uint32_t>> others;
  for (int i = 0; i < fs->size();) {
    const v1::Finding& f = fs->Get(i);
    if (f.severity() != v1::INFO || !f.host().empty()) {
      ++i;
      continue;
    }
    auto [it, fresh] = first.try_emplace(key(f), i);
    if (fresh || fs->Get(it->second).stream() == f.stream()) {
      ++i;
      continue;
    }
    others[it->second].push_back(f.pid());
    fs->DeleteSubrange(i, 1);
  }
  for (const auto& [i, pids] : others) {
    FindingBuilder f(std::move(*fs->Mutable(i)));
    std::vector<std::string> each;
    // A few by pid (a parent's hundreds of fork children are counted, not listed).
    for (size_t k = 0; k < pids.size() && k < 8; ++k) each.push_back(fmt::format("process {}", pids[k]));
    if (pids.size() > 8) each.push_back("...");
    f.Detail("also in", text::Show("{} ({} more of {})", fmt::join(each, ", "), pids.size(),
                                   text::Shown::Escaped(f.proto().exe())));  // a finished finding's: text
    *fs->Mutable(i) = std::move(f).Finish();
  }
}

}  // namespace

std::string UnreadableFilesNote(const Files& files) { return UnreadableFilesNote(files.errors()); }

std::string UnreadableFilesNote(const std::map<std::string, std::string>& errors) {
  if (errors.empty()) return "";
  std::string first;
  for (const auto& [path, err] : errors) {
    if (first.size() > 200) break;
    first += (first.empty() ? "" : "; ") + err;
  }
  return fmt::format("{} object file{} could not be read, so findings that need their "
                     "symbols are incomplete: {}{}",
                     errors.size(), errors.size() == 1 ? "" : "s", first, errors.size() > 1 ? "; ..." : "");
}

std::string Label(const v1::Library& l) {
  return l.version().empty() ? l.path() : fmt::format("{} ({})", l.path(), l.version());
}

elf::TraceFacts FactsOf(const store::TraceSet& traces) {
  elf::TraceFacts facts;
  for (const auto& f : traces.files)
    for (const auto& r : f.facts) facts.Add(r);
  return facts;
}

v1::Report Analyze(const v1::Timeline& timeline, const elf::TraceFacts* facts) {
  return Analyze(timeline, facts, nullptr, {});
}

v1::Report Analyze(const v1::Timeline& timeline, const elf::TraceFacts* facts, Files* files,
                   const std::function<void(Context&)>& also) {
  Context ctx(timeline, facts, files);
  v1::Report r = Analyze(ctx);
  if (also) also(ctx);
  return r;
}

v1::Report Analyze(Context& ctx) {
  v1::Report r;
  // The files the passes look into, read side by side first (each once, however many
  // objects it has: a churn's million objects are a few files).
  {
    text::PhaseTimer timer("files");
    std::unordered_set<const std::string*> seen;
    std::vector<std::string> paths;
    for (const auto& pi : ctx.processes())
      for (const auto& [id, o] : pi.objects)
        if ((o.load == nullptr || o.load->reason() != v1::LOAD_VDSO) && seen.insert(&o.path.str()).second)
          paths.push_back(o.path);
    ctx.files().ReadAhead(paths);
  }
  // The passes (registry.cc), in the table's order.
  for (const RegisteredPass& p : Passes()) {
    if (p.run == nullptr) continue;
    text::PhaseTimer timer(PassPhase(p));
    p.run(ctx, &r);
  }
  text::PhaseTimer timer("notes");
  DropShadowingExplainedByMissingSymbols(&r);
  DropMissingExplainedByFallThrough(&r);
  DropMissingExplainedByFailedDlopen(&r);
  FoldInfoAcrossProcesses(&r);
  NoteSnapshots(ctx, &r);
  NoteChangedFiles(ctx, &r);
  std::stable_sort(r.mutable_findings()->begin(), r.mutable_findings()->end(),
                   [](const v1::Finding& a, const v1::Finding& b) {
                     if (a.stream() != b.stream()) return a.stream() < b.stream();
                     return a.severity() > b.severity();
                   });
  return r;
}

}  // namespace ldscope::analysis
