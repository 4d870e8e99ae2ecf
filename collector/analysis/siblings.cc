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
// Which files differ: per SONAME, each process's first copy in the main namespace,
// identified by build-id when it has one (copies of one build unpacked into per-process
// directories agree), else by device and inode, else by path. A process that never
// loaded the SONAME has no say. The reference is the file most of them use; on a tie the
// file of the lowest rank (RANK, LOCAL_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK), else of
// the first started. When three or more processes all differ there is no norm to be odd
// against: nothing is reported.
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "analysis/families.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

std::string ProgramKey(const v1::ProcessTimeline& p) {
  static const std::regex rank_like("(^|=)[0-9]+(?=$|[^0-9A-Za-z_.])");
  std::string key = fmt::format("{}\n{}\n{}\n{}", p.pid_namespace(), p.ppid(), p.exe(),
                                p.argv_size() > 0 ? BaseName(p.argv(0)) : "");
  for (int i = 1; i < p.argv_size(); ++i) key += "\n" + std::regex_replace(p.argv(i), rank_like, "$1#");
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
  const Obj* o;
};

// One SONAME on which the odd ones out differ from the reference.
struct Disagreement {
  std::string soname;
  std::vector<Vote> reference, odd;
  bool majority = false;
};

std::string Labels(const std::vector<Vote>& vs) {
  std::vector<std::string> out;
  for (const Vote& v : vs) out.push_back(ShortWho(*v.pi->p));
  return fmt::format("{}", fmt::join(out, ", "));
}

void Report(Context& ctx, const std::vector<const ProcessIndex*>& group, const std::vector<Disagreement>& ds,
            v1::Report* out) {
  const Disagreement& d0 = ds.front();
  const ProcessIndex& first_odd = *d0.odd.front().pi;
  const v1::ProcessTimeline& p = *first_odd.p;
  auto f = NewFinding(first_odd, v1::SIBLING_MISMATCH, v1::WARNING);
  for (const Disagreement& d : ds) {
    *f.add_objects() = ctx.Describe(*d.reference.front().pi, *d.reference.front().o);
    for (const Vote& v : d.odd) {
      *f.add_objects() = ctx.Describe(*v.pi, *v.o);
      f.add_evidence(v.o->open_seq);
    }
  }
  const size_t voters = d0.reference.size() + d0.odd.size();
  f.set_headline(fmt::format("{} {} processes: {} loaded another {}{} than {}", voters, BaseName(p.exe()),
                             Labels(d0.odd), d0.soname,
                             ds.size() > 1 ? fmt::format(" (and {} more)", ds.size() - 1) : "",
                             d0.majority ? "the others" : Labels(d0.reference)));
  const std::string argv =
      p.argv_size() > 1 ? fmt::format(" {}", fmt::join(p.argv().begin() + 1, p.argv().end(), " ")) : "";
  layout::Detail(&f, "program", fmt::format("{}{} ({} processes, started by process {})", p.exe(), argv,
                                            group.size(), p.ppid()));
  for (const Disagreement& d : ds) {
    const Vote& r = d.reference.front();
    layout::Detail(&f, d.majority ? "the others" : "reference",
                   fmt::format("{}: {}{}, used by {}{}", d.soname, NormalPath(r.o->path),
                               ctx.VersionOf(r.o->path, r.o->soname).empty()
                                   ? ""
                                   : fmt::format(" ({})", ctx.VersionOf(r.o->path, r.o->soname)),
                               Labels(d.reference),
                               d.majority ? "" : " (no majority: the lowest rank's, or the first started's)"));
    for (const Vote& v : d.odd) {
      const std::string version = ctx.VersionOf(v.o->path, v.o->soname);
      layout::Detail(&f, "odd one out", fmt::format("{}: {}{}, loaded {}", Who(*v.pi->p), NormalPath(v.o->path),
                                                    version.empty() ? "" : fmt::format(" ({})", version),
                                                    ctx.HowLoaded(*v.pi, *v.o)));
    }
  }
  // The environment that set them apart, where the trace recorded it.
  const v1::ProcessTimeline& ref = *d0.reference.front().pi->p;
  std::set<std::string> fixed;
  for (const char* var : {"LD_PRELOAD", "LD_LIBRARY_PATH"}) {
    for (const Vote& v : d0.odd) {
      const std::string mine = EnvOf(*v.pi->p, var), theirs = EnvOf(ref, var);
      if (mine == theirs) continue;
      layout::Detail(&f, "environment", fmt::format("{}: {}; {}: {}", ShortWho(*v.pi->p),
                                                    mine.empty() ? std::string(var) + " unset" : std::string(var) + "=" + mine,
                                                    ShortWho(ref),
                                                    theirs.empty() ? std::string(var) + " unset" : std::string(var) + "=" + theirs));
    }
  }
  for (const Disagreement& d : ds)
    for (const Vote& v : d.odd) {
      const std::string who = ShortWho(*v.pi->p);
      const v1::CandidateStep step = v.o->load != nullptr ? render::FoundBy(*v.o->load) : v1::STEP_UNKNOWN;
      const std::string want = NormalPath(d.reference.front().o->path);
      std::string key, text, action;
      if (v.o->load != nullptr && v.o->load->reason() == v1::LOAD_PRELOAD &&
          EnvOf(*v.pi->p, "LD_PRELOAD") != EnvOf(ref, "LD_PRELOAD")) {
        action = "set-variable";
        key = who + " LD_PRELOAD";
        text = fmt::format("start {} without {} in LD_PRELOAD, as the others are started (in the launcher, or the "
                           "wrapper script that sets up that rank)", who, NormalPath(v.o->path));
      } else if (step == v1::STEP_LD_LIBRARY_PATH && EnvOf(*v.pi->p, "LD_LIBRARY_PATH") != EnvOf(ref, "LD_LIBRARY_PATH")) {
        action = "drop-from-ld-library-path";
        key = who + " LD_LIBRARY_PATH";
        text = fmt::format("give {} the others' LD_LIBRARY_PATH: drop {}", who, DirName(NormalPath(v.o->path)));
      } else {
        action = "pin-version";
        key = who + " " + d.soname;
        text = fmt::format("make {} load {} like the others, not {}", who, want, NormalPath(v.o->path));
      }
      if (fixed.insert(key).second) layout::Fix(&f, action, text);
    }
  layout::Compose(&f);
  *out->add_findings() = std::move(f);
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
      std::map<std::string, const Obj*> first;
      for (const auto& [id, o] : pi->objects) {
        if (!CountsAsLibrary(o)) continue;
        const Obj*& f = first[o.soname];
        if (f == nullptr || o.open_seq < f->open_seq) f = &o;
      }
      for (const auto& [soname, o] : first) by_soname[soname].push_back({pi, index, o});
    }
    std::map<std::vector<size_t>, std::vector<Disagreement>> by_odd_set;
    for (auto& [soname, votes] : by_soname) {
      std::map<std::string, std::vector<Vote>> by_file;
      for (const Vote& v : votes) by_file[Identity(*v.o)].push_back(v);
      if (by_file.size() < 2) continue;
      size_t most = 0, ties = 0;
      for (const auto& [id, vs] : by_file) most = std::max(most, vs.size());
      for (const auto& [id, vs] : by_file) ties += vs.size() == most;
      if (most == 1 && votes.size() >= 3) continue;  // all differ: no norm to be odd against
      // The reference: most votes; on a tie, the file of the lowest rank / first started.
      const std::vector<Vote>* ref = nullptr;
      std::tuple<bool, long, size_t> best{true, 0, SIZE_MAX};
      for (const auto& [id, vs] : by_file) {
        if (vs.size() != most) continue;
        for (const Vote& v : vs) {
          const auto order = RankOrder(*v.pi->p, v.index);
          if (ref == nullptr || order < best) {
            best = order;
            ref = &vs;
          }
        }
      }
      Disagreement d;
      d.soname = soname;
      d.majority = ties == 1;
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
