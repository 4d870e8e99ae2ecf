// Siblings that disagree: processes of one trace that run the same program, started by
// the same parent (torchrun's ranks, pytest-xdist's workers, mpirun's local ranks), and
// bound different files for one SONAME. The odd ones out are named against the file
// most of them use.
//
// Who counts as a sibling:
// - exec'd images only: a forked child shares its parent's objects (the same image), so
//   it never disagrees with it, and is not a program of its own;
// - the same parent process (pid namespace and ppid): two runs of one program by
//   different parents belong to different jobs;
// - the same program: the executable, and argv with rank-like numbers set aside (a whole
//   numeric argument, or the digits after '=': `--local_rank=1`, multiprocessing's
//   `spawn_main(tracker_fd=5, pipe_handle=9)`). Any other difference in argv (another
//   script, another -c) is another program. torchrun gives its ranks identical argv and
//   tells them apart by RANK/LOCAL_RANK in the environment; execnet does the same.
//
// Which files differ: per SONAME, each process's copies in the main namespace (its first
// copy, the one lookups reach, and any other file it loaded for that SONAME), each file
// identified by build-id when it has one (copies of one build unpacked into per-process
// directories agree), else by device and inode, else by path. Processes agree when their
// first copies and their sets of copies are the same: one that holds an extra copy
// besides the others' one differs from them as much as one whose only copy is another
// file. A process that never loaded the SONAME has no say. The reference is the file (or
// set of files) most of them use; on a tie the one of fewest copies (one copy of a SONAME
// is the norm beside two), then that of the lowest rank (RANK, LOCAL_RANK, SLURM_PROCID,
// OMPI_COMM_WORLD_RANK), else of the first started. When three or more processes all
// differ there is no norm to be odd against: nothing is reported.
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

std::string ProgramKey(const v1::ProcessTimeline& p) {
  static const std::regex rank_like("(^|=)[0-9]+(?=$|[^0-9A-Za-z_.])");
  std::string key = FieldsKey({std::to_string(p.pid_namespace()), std::to_string(p.ppid()), p.exe(),
                               p.argv_size() > 0 ? BaseName(p.argv(0)) : ""});
  for (int i = 1; i < p.argv_size(); ++i) key += FieldsKey({std::regex_replace(p.argv(i), rank_like, "$1#")});
  return key;
}

const char* const kRankVars[][2] = {{"RANK", "rank"},
                                    {"LOCAL_RANK", "local rank"},
                                    {"SLURM_PROCID", "Slurm task"},
                                    {"OMPI_COMM_WORLD_RANK", "MPI rank"}};

// "rank 1 (local rank 1)", "Slurm task 3", or "" when no rank variable was recorded.
std::string RankLabel(const v1::ProcessTimeline& p) {
  std::string label;
  for (const auto& [var, words] : kRankVars) {
    auto it = p.env().find(var);
    if (it == p.env().end()) continue;
    if (label.empty()) label = fmt::format("{} {}", words, it->second);
    else if (std::string(var) == "LOCAL_RANK") label += fmt::format(" (local rank {})", it->second);
  }
  return label;
}

// For the tie-break: (has no rank, rank number, start order).
std::tuple<bool, long, size_t> RankOrder(const v1::ProcessTimeline& p, size_t index) {
  for (const auto& [var, words] : kRankVars) {
    auto it = p.env().find(var);
    if (it != p.env().end() && !it->second.empty() &&
        std::all_of(it->second.begin(), it->second.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return {false, std::strtol(it->second.c_str(), nullptr, 10), index};
  }
  return {true, 0, index};
}

std::string Who(const v1::ProcessTimeline& p) {
  const std::string rank = RankLabel(p);
  return rank.empty() ? fmt::format("process {}", p.pid()) : fmt::format("{}, process {}", rank, p.pid());
}

std::string ShortWho(const v1::ProcessTimeline& p) {
  const std::string rank = RankLabel(p);
  return rank.empty() ? fmt::format("process {}", p.pid()) : rank.substr(0, rank.find(" ("));
}


std::string Identity(const Obj& o) {
  if (!o.build_id.empty()) return "build-id " + o.build_id;
  if (o.dev != 0) return fmt::format("inode {}:{}", o.dev, o.ino);
  return "path " + NormalPath(o.path);
}

struct Vote {
  const ProcessIndex* pi;
  size_t index;  // start order
  const Obj* o;  // its first copy
  std::vector<const Obj*> copies;  // every distinct file it loaded for the SONAME, in load order
};

// A vote's key: its first copy's file, then its other files (sorted).
std::string VoteKey(const Vote& v) {
  std::vector<std::string> others;
  for (const Obj* c : v.copies)
    if (c != v.o) others.push_back(Identity(*c));
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  std::string key = FieldsKey({Identity(*v.o)});
  for (const auto& o : others) key += FieldsKey({o});
  return key;
}

// The copies of odd that are none of ref's files, when odd's first copy is ref's: what it
// holds besides what the reference holds (empty when its first copy differs).
std::vector<const Obj*> Extra(const Vote& odd, const Vote& ref) {
  std::vector<const Obj*> out;
  if (Identity(*odd.o) != Identity(*ref.o)) return out;
  std::set<std::string> theirs;
  for (const Obj* c : ref.copies) theirs.insert(Identity(*c));
  for (const Obj* c : odd.copies)
    if (theirs.insert(Identity(*c)).second) out.push_back(c);
  return out;
}

// One SONAME on which the odd ones out differ from the reference.
struct Disagreement {
  std::string soname;
  std::vector<Vote> reference, odd;
  bool majority = false;
  bool fewer_copies = false;  // a tie broken by the number of copies
};

std::string Labels(const std::vector<Vote>& vs) {
  std::vector<std::string> out;
  for (const Vote& v : vs) out.push_back(ShortWho(*v.pi->p));
  return fmt::format("{}", fmt::join(out, ", "));
}

// The objects and evidence of every disagreement, and the headline of the first.
void Headline(Context& ctx, const std::vector<Disagreement>& ds, FindingBuilder& f) {
  const Disagreement& d0 = ds.front();
  const v1::ProcessTimeline& p = *d0.odd.front().pi->p;
  for (const Disagreement& d : ds) {
    *f.proto().add_objects() = ctx.Describe(*d.reference.front().pi, *d.reference.front().o);
    for (const Vote& v : d.odd) {
      *f.proto().add_objects() = ctx.Describe(*v.pi, *v.o);
      f.proto().add_evidence(v.o->open_seq);
    }
  }
  const size_t voters = d0.reference.size() + d0.odd.size();
  const bool all_extra =
      std::all_of(d0.odd.begin(), d0.odd.end(), [&](const Vote& v) { return !Extra(v, d0.reference.front()).empty(); });
  const std::string more = ds.size() > 1 ? fmt::format(" (and {} more)", ds.size() - 1) : "";
  const std::string others = d0.majority ? "the others" : Labels(d0.reference);
  const size_t ref_copies = d0.reference.front().copies.size();
  f.Headline(text::ShowBytes(all_extra ? fmt::format("{} {} processes: {} holds {} copies of {}{}, {} {}", voters,
                                                     BaseName(p.exe()), Labels(d0.odd), d0.odd.front().copies.size(),
                                                     d0.soname, more, others,
                                                     ref_copies == 1 ? std::string("one") : std::to_string(ref_copies))
                                       : fmt::format("{} {} processes: {} loaded another {}{} than {}", voters,
                                                     BaseName(p.exe()), Labels(d0.odd), d0.soname, more, others)));
}

// The program, then per SONAME the reference's file and each odd one's.
void DetailFiles(Context& ctx, const std::vector<const ProcessIndex*>& group, const std::vector<Disagreement>& ds,
                 FindingBuilder& f) {
  const v1::ProcessTimeline& p = *ds.front().odd.front().pi->p;
  const std::string argv =
      p.argv_size() > 1 ? fmt::format(" {}", fmt::join(p.argv().begin() + 1, p.argv().end(), " ")) : "";
  f.Detail("program", text::Show("{}{} ({} processes, started by process {})", p.exe(), argv, group.size(), p.ppid()));
  for (const Disagreement& d : ds) {
    const Vote& r = d.reference.front();
    f.Detail(text::ShowBytes(d.majority ? "the others" : "reference"),
             text::Show("{}: {}{}, used by {}{}", d.soname, NormalPath(r.o->path),
                        ctx.VersionOf(r.o->path, r.o->soname).empty()
                            ? ""
                            : fmt::format(" ({})", ctx.VersionOf(r.o->path, r.o->soname)),
                        Labels(d.reference),
                        d.majority       ? ""
                        : d.fewer_copies ? " (no majority: the one with the fewest copies)"
                                         : " (no majority: the lowest rank's, or the first started's)"));
    for (const Vote& v : d.odd) {
      const std::vector<const Obj*> extra = Extra(v, r);
      if (extra.empty()) {
        const std::string version = ctx.VersionOf(v.o->path, v.o->soname);
        f.Detail("odd one out",
                 text::Show("{}: {}{}, loaded {}", Who(*v.pi->p), NormalPath(v.o->path),
                            version.empty() ? "" : fmt::format(" ({})", version), ctx.HowLoaded(*v.pi, *v.o)));
        continue;
      }
      for (const Obj* e : extra) {
        const std::string version = ctx.VersionOf(e->path, e->soname);
        f.Detail("odd one out",
                 text::Show("{}: the same first copy, and also {}{}, loaded {}", Who(*v.pi->p), NormalPath(e->path),
                            version.empty() ? "" : fmt::format(" ({})", version), ctx.HowLoaded(*v.pi, *e)));
      }
    }
  }
}

// The environment that set them apart, where the trace recorded it.
void DetailEnvironment(const std::vector<Disagreement>& ds, FindingBuilder& f) {
  const Disagreement& d0 = ds.front();
  const v1::ProcessTimeline& ref = *d0.reference.front().pi->p;
  for (const char* var : {"LD_PRELOAD", "LD_LIBRARY_PATH"}) {
    for (const Vote& v : d0.odd) {
      const std::string mine = EnvOf(*v.pi->p, var), theirs = EnvOf(ref, var);
      if (mine == theirs) continue;
      f.Detail("environment",
               text::Show("{}: {}; {}: {}", ShortWho(*v.pi->p),
                          mine.empty() ? std::string(var) + " unset" : std::string(var) + "=" + mine, ShortWho(ref),
                          theirs.empty() ? std::string(var) + " unset" : std::string(var) + "=" + theirs));
    }
  }
}

// A fix per odd one's file: the variable that set it apart, else loading the
// reference's file (instead, or only).
void AddFixes(const std::vector<Disagreement>& ds, FindingBuilder& f) {
  const v1::ProcessTimeline& ref = *ds.front().reference.front().pi->p;
  std::set<std::string> fixed;
  for (const Disagreement& d : ds)
    for (const Vote& v : d.odd) {
      const std::string who = ShortWho(*v.pi->p);
      const std::string want = NormalPath(d.reference.front().o->path);
      std::vector<const Obj*> extra = Extra(v, d.reference.front());
      const bool besides = !extra.empty();
      if (!besides) extra = {v.o};
      for (const Obj* o : extra) {
        const v1::CandidateStep step = o->load != nullptr ? render::FoundBy(*o->load) : v1::STEP_UNKNOWN;
        std::string key, text;
        v1::FixAction action = v1::FIX_ACTION_UNSPECIFIED;
        if (o->load != nullptr && o->load->reason() == v1::LOAD_PRELOAD &&
            EnvOf(*v.pi->p, "LD_PRELOAD") != EnvOf(ref, "LD_PRELOAD")) {
          action = v1::FIX_SET_VARIABLE;
          key = who + " LD_PRELOAD";
          text = fmt::format(
              "start {} without {} in LD_PRELOAD, as the others are started (in the launcher, or the "
              "wrapper script that sets up that rank)",
              who, NormalPath(o->path));
        } else if (step == v1::STEP_LD_LIBRARY_PATH &&
                   EnvOf(*v.pi->p, "LD_LIBRARY_PATH") != EnvOf(ref, "LD_LIBRARY_PATH")) {
          action = v1::FIX_DROP_FROM_LD_LIBRARY_PATH;
          key = who + " LD_LIBRARY_PATH";
          text = fmt::format("give {} the others' LD_LIBRARY_PATH: drop {}", who, DirName(NormalPath(o->path)));
        } else if (besides) {
          action = v1::FIX_PIN_VERSION;
          key = who + " " + d.soname + " " + NormalPath(o->path);
          text = fmt::format(
              "make {} load only {} like the others, not also {} (what loads it there: a plugin, a "
              "variable such as NCCL_NET_PLUGIN, another package)",
              who, want, NormalPath(o->path));
        } else {
          action = v1::FIX_PIN_VERSION;
          key = who + " " + d.soname;
          text = fmt::format("make {} load {} like the others, not {}", who, want, NormalPath(o->path));
        }
        if (fixed.insert(key).second) f.Fix(action, text::ShowBytes(text));
      }
    }
}

void Report(Context& ctx, const std::vector<const ProcessIndex*>& group, const std::vector<Disagreement>& ds,
            v1::Report* out) {
  FindingBuilder f(*ds.front().odd.front().pi, v1::SIBLING_MISMATCH, v1::WARNING);
  Headline(ctx, ds, f);
  DetailFiles(ctx, group, ds, f);
  DetailEnvironment(ds, f);
  AddFixes(ds, f);
  std::move(f).AddTo(out);
}

}  // namespace

std::string EnvOf(const v1::ProcessTimeline& p, const std::string& var) {
  auto it = p.env().find(var);
  return it == p.env().end() ? std::string() : it->second;
}

bool CountsAsLibrary(const Obj& o) {
  if (o.soname.empty() || o.path.empty() || o.rolled_back || o.lmid != 0) return false;
  if (o.load == nullptr) return true;
  return o.load->reason() != v1::LOAD_EXECUTABLE && o.load->reason() != v1::LOAD_VDSO;
}

void FindSiblingMismatch(Context& ctx, v1::Report* out) {
  std::map<std::string, std::vector<std::pair<size_t, const ProcessIndex*>>> groups;
  const auto& procs = ctx.processes();
  for (size_t i = 0; i < procs.size(); ++i) {
    const v1::ProcessTimeline& p = *procs[i].p;
    if ((p.start_reason() != v1::START_EXEC && p.start_reason() != v1::START_SNAPSHOT) || p.exe().empty()) continue;
    groups[ProgramKey(p)].emplace_back(i, &procs[i]);
  }
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    // Per SONAME: who bound which file.
    std::map<std::string, std::vector<Vote>> by_soname;
    for (const auto& [index, pi] : members) {
      std::map<std::string, std::vector<const Obj*>> copies;
      for (const auto& [id, o] : pi->objects)
        if (CountsAsLibrary(o)) copies[o.soname].push_back(&o);
      for (auto& [soname, objs] : copies) {
        std::sort(objs.begin(), objs.end(), [](const Obj* a, const Obj* b) { return a->open_seq < b->open_seq; });
        by_soname[soname].push_back({pi, index, objs.front(), objs});
      }
    }
    std::map<std::vector<size_t>, std::vector<Disagreement>> by_odd_set;
    for (auto& [soname, votes] : by_soname) {
      std::map<std::string, std::vector<Vote>> by_file;
      for (const Vote& v : votes) by_file[VoteKey(v)].push_back(v);
      if (by_file.size() < 2) continue;
      size_t most = 0, ties = 0;
      for (const auto& [id, vs] : by_file) most = std::max(most, vs.size());
      for (const auto& [id, vs] : by_file) ties += vs.size() == most;
      if (most == 1 && votes.size() >= 3) continue;  // all differ: no norm to be odd against
      // The reference: most votes; on a tie, the fewest copies, then the file of the
      // lowest rank / first started.
      const std::vector<Vote>* ref = nullptr;
      std::tuple<size_t, bool, long, size_t> best{SIZE_MAX, true, 0, SIZE_MAX};
      std::set<size_t> tied_counts;
      for (const auto& [id, vs] : by_file) {
        if (vs.size() != most) continue;
        for (const Vote& v : vs) {
          tied_counts.insert(v.copies.size());
          const auto [no_rank, rank, index] = RankOrder(*v.pi->p, v.index);
          const std::tuple<size_t, bool, long, size_t> order{v.copies.size(), no_rank, rank, index};
          if (ref == nullptr || order < best) {
            best = order;
            ref = &vs;
          }
        }
      }
      Disagreement d;
      d.soname = soname;
      d.majority = ties == 1;
      d.fewer_copies = !d.majority && tied_counts.size() > 1;
      d.reference = *ref;
      std::vector<size_t> odd_set;
      for (const auto& [id, vs] : by_file)
        if (&vs != ref)
          for (const Vote& v : vs) d.odd.push_back(v);
      // Listed by rank (the order processes started in is a race).
      auto by_rank = [](const Vote& a, const Vote& b) { return RankOrder(*a.pi->p, a.index) < RankOrder(*b.pi->p, b.index); };
      std::sort(d.reference.begin(), d.reference.end(), by_rank);
      std::sort(d.odd.begin(), d.odd.end(), by_rank);
      for (const Vote& v : d.odd) odd_set.push_back(v.index);
      by_odd_set[odd_set].push_back(std::move(d));
    }
    std::vector<const ProcessIndex*> group;
    for (const auto& [index, pi] : members) group.push_back(pi);
    for (const auto& [odd_set, ds] : by_odd_set) Report(ctx, group, ds, out);
  }
}

}  // namespace ldscope::analysis
