// See fleet.h. The rule is the siblings pass's (siblings.cc), widened from one parent
// on one host to every host given to one `report`:
// - exec'd images only (a forked child shares its parent's objects);
// - the same program: the executable and argv with rank-like numbers set aside; no
//   parent, no pid namespace (those are per host);
// - per SONAME, each process's first copy in the main namespace, identified by build-id
//   when it has one, else by path (an inode means nothing on another machine);
// - the reference is the file most processes use; on a tie, the lowest rank's (RANK,
//   SLURM_PROCID, OMPI_COMM_WORLD_RANK), else the first host's; when three or more all
//   differ there is no norm: nothing is reported. A disagreement is reported only when
//   its processes run on two or more hosts (one host's ranks are the siblings pass's).
#include "analysis/fleet.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/analysis.h"
#include "analysis/families.h"
#include "render/words.h"
#include "text/shown.h"

namespace ldscope::analysis {
namespace {

// How many processes, hosts or fixes one finding names before it counts the rest.
constexpr size_t kListed = 8;

std::string ProgramKey(const v1::ProcessTimeline& p) {
  static const std::regex rank_like("(^|=)[0-9]+(?=$|[^0-9A-Za-z_.])");
  std::string key = FieldsKey({p.exe(), p.argv_size() > 0 ? BaseName(p.argv(0)) : ""});
  for (int i = 1; i < p.argv_size(); ++i) key += FieldsKey({std::regex_replace(p.argv(i), rank_like, "$1#")});
  return key;
}


bool Numeric(const std::string& s) {
  return !s.empty() && s.size() < 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "a, b, c and 5 more".
std::string Listed(const std::vector<std::string>& items) {
  std::vector<std::string> shown(items.begin(), items.begin() + std::min(items.size(), kListed));
  std::string s = fmt::format("{}", fmt::join(shown, ", "));
  if (items.size() > kListed) s += fmt::format(" and {} more", items.size() - kListed);
  return s;
}

// The program as its key spells it: " arg1 arg2..." (argv with rank-like numbers as #).
std::string KeyArguments(const std::string& key) {
  std::string argv;
  size_t at = key.find('\0', key.find('\0') + 1);  // after exe and argv[0]
  for (size_t end; at != std::string::npos && (end = key.find('\0', at + 1)) != std::string::npos; at = end)
    argv += " " + key.substr(at + 1, end - at - 1);
  return argv;
}

}  // namespace

uint32_t Fleet::Intern(const std::string& s) { return strings_.Id(s); }

uint32_t Fleet::InternChoice(Choice c) {
  const std::string key = FieldsKey(
      {c.path, c.soname, c.identity, c.build_id, c.version, c.loaded_by, c.found_by, c.preload ? "preload" : ""});
  auto [it, added] = choice_ids_.emplace(key, static_cast<uint32_t>(choices_.size()));
  if (added) choices_.push_back(std::move(c));
  return it->second;
}

void Fleet::Add(Context& ctx, const std::string& host) {
  const uint32_t host_id = static_cast<uint32_t>(hosts_.size());
  hosts_.push_back(host);
  for (const ProcessIndex& pi : ctx.processes()) {
    const v1::ProcessTimeline& p = *pi.p;
    if ((p.start_reason() != v1::START_EXEC && p.start_reason() != v1::START_SNAPSHOT) || p.exe().empty()) continue;
    Proc proc;
    proc.host = host_id;
    proc.program = Intern(ProgramKey(p));
    proc.exe = Intern(p.exe());
    proc.pid = p.pid();
    proc.stream = p.stream();
    proc.order = procs_.size();
    for (const char* var : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
      const std::string v = EnvOf(p, var);
      if (v.empty()) continue;
      const char* words = std::string(var) == "RANK" ? "rank" : std::string(var) == "SLURM_PROCID" ? "Slurm task" : "MPI rank";
      proc.rank = Intern(fmt::format("{} {}", words, v));
      if (Numeric(v)) proc.rank_number = std::strtol(v.c_str(), nullptr, 10);
      break;
    }
    for (const char* var : {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
      const std::string v = EnvOf(p, var);
      if (v.empty()) continue;
      proc.local_rank = Intern(v);
      break;
    }
    if (proc.rank == 0) proc.rank = Intern("");
    if (proc.local_rank == 0) proc.local_rank = Intern("");
    proc.ld_preload = Intern(EnvOf(p, "LD_PRELOAD"));
    proc.ld_library_path = Intern(EnvOf(p, "LD_LIBRARY_PATH"));
    std::map<std::string, const Obj*> first;
    for (const auto& [id, o] : pi.objects) {
      if (!CountsAsLibrary(o)) continue;
      const Obj*& f = first[o.soname];
      if (f == nullptr || o.open_seq < f->open_seq) f = &o;
    }
    for (const auto& [soname, o] : first) {
      Choice c;
      c.path = NormalPath(o->path);
      c.soname = soname;
      c.build_id = o->build_id;
      c.identity = o->build_id.empty() ? "path " + c.path : "build-id " + o->build_id;
      auto v = versions_.find(o->path);
      if (v == versions_.end()) v = versions_.emplace(o->path, ctx.VersionOf(o->path, o->soname)).first;
      c.version = v->second;
      c.loaded_by = ctx.HowLoaded(pi, *o);
      if (o->load != nullptr) c.found_by = render::FoundByWord(*o->load);
      c.preload = o->load != nullptr && o->load->reason() == v1::LOAD_PRELOAD;
      proc.libs.emplace_back(Intern(soname), InternChoice(std::move(c)));
    }
    std::sort(proc.libs.begin(), proc.libs.end());
    procs_.push_back(std::move(proc));
  }
}

size_t Fleet::SharedPrograms() const {
  std::map<uint32_t, std::set<uint32_t>> hosts_of;
  for (const Proc& p : procs_) hosts_of[p.program].insert(p.host);
  size_t n = 0;
  for (const auto& [program, hosts] : hosts_of) n += hosts.size() >= 2;
  return n;
}

std::string Fleet::Who(const Proc& p, bool with_pid) const {
  std::string who = hosts_[p.host];
  if (!S(p.rank).empty()) who += " " + S(p.rank);
  if (!S(p.local_rank).empty()) who += fmt::format(" (local rank {})", S(p.local_rank));
  if (with_pid || S(p.rank).empty()) who += fmt::format("{} process {}", S(p.rank).empty() ? "" : ",", p.pid);
  return who;
}

// A SONAME on which the processes of one program disagree: the users of the
// reference file and the others, each sorted ByOrder; the reference's choice; whether
// the reference is the file of a strict majority.
struct Fleet::Disagreement {
  uint32_t soname = 0;
  std::vector<const Proc*> reference, odd;
  uint32_t ref_choice = 0;
  bool majority = false;
};

// (no rank, rank, order): the tie-break and the order processes are listed in.
bool Fleet::ByOrder(const Proc* a, const Proc* b) {
  return std::make_tuple(a->rank_number < 0, a->rank_number, a->order) <
         std::make_tuple(b->rank_number < 0, b->rank_number, b->order);
}

v1::Library Fleet::LibraryOf(const Choice& c) {
  v1::Library l;
  l.set_path(c.path);
  l.set_soname(c.soname);
  l.set_version(c.version);
  l.set_build_id(c.build_id);
  l.set_loaded_by(c.loaded_by);
  l.set_found_by(c.found_by);
  return l;
}

const Fleet::Choice& Fleet::ChoiceOf(const Proc& p, uint32_t soname) const {
  for (const auto& [s, c] : p.libs)
    if (s == soname) return choices_[c];
  return choices_.front();  // not reached: p voted on soname
}

// The hosts of ps, each once, in the order of ps.
std::vector<std::string> Fleet::HostsOf(const std::vector<const Proc*>& ps) const {
  std::vector<std::string> hs;
  std::set<uint32_t> seen;
  for (const Proc* p : ps)
    if (seen.insert(p->host).second) hs.push_back(hosts_[p->host]);
  return hs;
}

// The SONAMEs the processes of one program disagree on, grouped by odd processes.
Fleet::ByOddSet Fleet::DisagreementsOf(const std::vector<const Proc*>& members) const {
  // Per SONAME, per file identity: who.
  std::map<uint32_t, Votes> votes;
  for (const Proc* p : members)
    for (const auto& [soname, choice] : p->libs) votes[soname][choices_[choice].identity].push_back(p);
  ByOddSet by_odd_set;
  for (const auto& [soname, by_file] : votes) {
    Disagreement d;
    if (!Tally(soname, by_file, &d)) continue;
    std::vector<size_t> odd_set;
    for (const Proc* p : d.odd) odd_set.push_back(p->order);
    by_odd_set[odd_set].push_back(std::move(d));
  }
  return by_odd_set;
}

// The reference file for soname (the one most processes use; on a tie, the one of the
// process first ByOrder) and the processes that loaded another. False when there is
// nothing to report: one file, one host, or all differ.
bool Fleet::Tally(uint32_t soname, const Votes& by_file, Disagreement* d) const {
  if (by_file.size() < 2) return false;
  size_t most = 0, ties = 0, voters = 0;
  std::set<uint32_t> voter_hosts;
  for (const auto& [id, ps] : by_file) {
    most = std::max(most, ps.size());
    voters += ps.size();
    for (const Proc* p : ps) voter_hosts.insert(p->host);
  }
  if (voter_hosts.size() < 2) return false;
  for (const auto& [id, ps] : by_file) ties += ps.size() == most;
  if (most == 1 && voters >= 3) return false;  // all differ: no norm to be odd against
  const std::vector<const Proc*>* ref = nullptr;
  for (const auto& [id, ps] : by_file) {
    if (ps.size() != most) continue;
    const Proc* best = *std::min_element(ps.begin(), ps.end(), ByOrder);
    if (ref == nullptr || ByOrder(best, *std::min_element(ref->begin(), ref->end(), ByOrder))) ref = &ps;
  }
  d->soname = soname;
  d->majority = ties == 1;
  d->reference = *ref;
  for (const auto& [id, ps] : by_file)
    if (&ps != ref) d->odd.insert(d->odd.end(), ps.begin(), ps.end());
  std::sort(d->reference.begin(), d->reference.end(), ByOrder);
  std::sort(d->odd.begin(), d->odd.end(), ByOrder);
  for (const auto& [s, c] : d->reference.front()->libs)
    if (s == soname) d->ref_choice = c;
  return true;
}

void Fleet::Find(v1::Report* out) const {
  std::map<uint32_t, std::vector<const Proc*>> programs;
  for (const Proc& p : procs_) programs[p.program].push_back(&p);
  for (const auto& [program, members] : programs) {
    std::set<uint32_t> member_hosts;
    for (const Proc* p : members) member_hosts.insert(p->host);
    if (member_hosts.size() < 2) continue;
    for (const auto& [odd_set, ds] : DisagreementsOf(members))
      *out->add_findings() = Mismatch(program, members.size(), member_hosts.size(), ds);
  }
}

// One HOST_MISMATCH finding: the disagreements ds share their odd processes.
// processes, hosts: how many run the program.
v1::Finding Fleet::Mismatch(uint32_t program, size_t processes, size_t hosts,
                            const std::vector<Disagreement>& ds) const {
  const Disagreement& d0 = ds.front();
  const Proc& first = *d0.odd.front();
  FindingBuilder f(v1::HOST_MISMATCH, v1::WARNING);
  f.proto().set_pid(first.pid);
  f.proto().set_exe(S(first.exe));
  f.proto().set_host(hosts_[first.host]);
  for (const Disagreement& d : ds) {
    *f.proto().add_objects() = LibraryOf(choices_[d.ref_choice]);
    std::set<uint32_t> odd_choices;
    for (const Proc* p : d.odd)
      for (const auto& [s, c] : p->libs)
        if (s == d.soname && odd_choices.insert(c).second) *f.proto().add_objects() = LibraryOf(choices_[c]);
  }
  f.Headline(text::ShowBytes(MismatchHeadline(ds, hosts)));
  f.Detail("program",
           text::Show("{}{} ({} processes on {} hosts)", S(first.exe), KeyArguments(S(program)), processes, hosts));
  for (const Disagreement& d : ds) AddChoiceDetails(&f, d);
  AddEnvironmentDetails(&f, d0);
  AddMismatchFixes(&f, ds);
  return std::move(f).Finish();
}

std::string Fleet::MismatchHeadline(const std::vector<Disagreement>& ds, size_t hosts) const {
  const Disagreement& d0 = ds.front();
  const std::vector<std::string> odd_hosts = HostsOf(d0.odd);
  std::vector<std::string> odd_who;
  for (const Proc* p : d0.odd) odd_who.push_back(Who(*p, false));
  const std::string exe_base = BaseName(S(d0.odd.front()->exe));
  return fmt::format(
      "{} of {} {} processes on {} hosts loaded another {}{} than {}: {}", d0.odd.size(),
      d0.odd.size() + d0.reference.size(), exe_base, hosts, S(d0.soname),
      ds.size() > 1 ? fmt::format(" (and {} more)", ds.size() - 1) : "",
      d0.majority ? "the others" : Who(*d0.reference.front(), false),
      odd_hosts.size() <= 3 && d0.odd.size() <= 3 ? Listed(odd_who) : Listed(odd_hosts));
}

// The reference file and its users, then each odd process's file (kListed of them).
void Fleet::AddChoiceDetails(FindingBuilder* f, const Disagreement& d) const {
  const Choice& r = choices_[d.ref_choice];
  const std::vector<std::string> ref_hosts = HostsOf(d.reference);
  std::string users;
  if (d.reference.size() <= 3) {
    std::vector<std::string> who;
    for (const Proc* p : d.reference) who.push_back(Who(*p, false));
    users = Listed(who);
  } else {
    users = fmt::format("{} processes on {} host{} ({})", d.reference.size(), ref_hosts.size(),
                        ref_hosts.size() == 1 ? "" : "s", Listed(ref_hosts));
  }
  f->Detail(text::ShowBytes(d.majority ? "the others" : "reference"),
            text::Show("{}: {}{}, used by {}{}", S(d.soname), r.path,
                       r.version.empty() ? "" : fmt::format(" ({})", r.version), users,
                       d.majority ? "" : " (no majority: the lowest rank's, or the first host's)"));
  size_t shown = 0;
  for (const Proc* p : d.odd) {
    if (++shown > kListed) break;
    const Choice& c = ChoiceOf(*p, d.soname);
    f->Detail("odd one out", text::Show("{}: {}{}, loaded {}", Who(*p, true), c.path,
                                        c.version.empty() ? "" : fmt::format(" ({})", c.version), c.loaded_by));
  }
  if (d.odd.size() > kListed) {
    std::vector<const Proc*> rest(d.odd.begin() + kListed, d.odd.end());
    f->Detail("odd ones out", text::Show("{} more on {}", rest.size(), Listed(HostsOf(rest))));
  }
}

// The environment that set them apart, where the traces recorded it.
void Fleet::AddEnvironmentDetails(FindingBuilder* f, const Disagreement& d0) const {
  const Proc& ref = *d0.reference.front();
  size_t env_lines = 0;
  for (const auto& [var, field] : {std::pair<const char*, uint32_t Proc::*>{"LD_PRELOAD", &Proc::ld_preload},
                                   std::pair<const char*, uint32_t Proc::*>{"LD_LIBRARY_PATH", &Proc::ld_library_path}}) {
    for (const Proc* p : d0.odd) {
      if (p->*field == ref.*field || env_lines >= kListed) continue;
      ++env_lines;
      // (var and field as parameters: clang 14 cannot capture structured bindings.)
      auto shown = [&](const Proc& q, const char* name, uint32_t Proc::*member) {
        return S(q.*member).empty() ? std::string(name) + " unset" : std::string(name) + "=" + S(q.*member);
      };
      f->Detail("environment", text::Show("{}: {}; {}: {}", Who(*p, false), shown(*p, var, field), Who(ref, false),
                                          shown(ref, var, field)));
    }
  }
}

// Per odd process (kListed at most): a variable to set or unset, else one
// pin-version fix per (SONAME, file the hosts have).
void Fleet::AddMismatchFixes(FindingBuilder* f, const std::vector<Disagreement>& ds) const {
  const Proc& ref = *ds.front().reference.front();
  std::set<std::string> fixed;
  // Hosts with another install of the file: one fix per (SONAME, file they have).
  std::map<std::pair<uint32_t, std::string>, std::vector<std::string>> install;
  std::vector<std::pair<uint32_t, std::string>> install_order;
  for (const Disagreement& d : ds)
    for (const Proc* p : d.odd) {
      if (fixed.size() >= kListed) break;
      const Choice& c = ChoiceOf(*p, d.soname);
      const std::string who = Who(*p, false);
      std::string key, text;
      v1::FixAction action = v1::FIX_ACTION_UNSPECIFIED;
      if (c.preload && p->ld_preload != ref.ld_preload) {
        action = v1::FIX_SET_VARIABLE;
        key = who + " LD_PRELOAD";
        text = fmt::format("start {} without {} in LD_PRELOAD, as the others are started (in the job script or "
                           "the launcher's environment on that host)", who, c.path);
      } else if (c.found_by == render::StepWord(v1::STEP_LD_LIBRARY_PATH) && p->ld_library_path != ref.ld_library_path) {
        action = v1::FIX_DROP_FROM_LD_LIBRARY_PATH;
        key = who + " LD_LIBRARY_PATH";
        text = fmt::format("give {} the others' LD_LIBRARY_PATH: drop {}", who, DirName(c.path));
      } else {
        auto& hs = install[{d.soname, c.path}];
        if (hs.empty()) install_order.push_back({d.soname, c.path});
        if (std::find(hs.begin(), hs.end(), hosts_[p->host]) == hs.end()) hs.push_back(hosts_[p->host]);
        continue;
      }
      if (fixed.insert(key).second) f->Fix(action, text::ShowBytes(text));
    }
  for (const auto& k : install_order) {
    const Disagreement* d = nullptr;
    for (const Disagreement& x : ds)
      if (x.soname == k.first) d = &x;
    const Choice& want = choices_[d->ref_choice];
    f->Fix(v1::FIX_PIN_VERSION, text::Show("install on {} the {} the others load ({}{}), or make its processes load it "
                                           "instead of {}",
                                           Listed(install[k]), S(k.first), want.path,
                                           want.version.empty() ? "" : ", " + want.version, k.second));
  }
}

}  // namespace ldscope::analysis
