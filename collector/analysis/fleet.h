// Many hosts: processes that run the same program on several machines (the ranks of a
// multi-node job, traced with one `ldscope run` or LDSCOPE_DIR per node) and bound
// different files for one SONAME. `report` analyses one host's traces at a time and
// hands each host's Context to Fleet::Add, which keeps a small summary per process (the
// program, the rank variables, per SONAME the file chosen, interned); Find then compares
// the summaries of all hosts (HOST_MISMATCH).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/context.h"
#include "analysis/finding_builder.h"
#include "ldscope_proto/report.pb.h"

namespace ldscope::analysis {

class Fleet {
 public:
  // The exec'd processes of one host's timeline. host: the label findings name.
  void Add(Context& ctx, const std::string& host);
  // HOST_MISMATCH findings: per program run on two or more hosts, per SONAME, the
  // processes whose file differs from the one most of them use.
  void Find(v1::Report* out) const;
  // For the report's note: hosts added, processes kept, programs seen on 2+ hosts.
  size_t hosts() const { return hosts_.size(); }
  size_t processes() const { return procs_.size(); }
  size_t SharedPrograms() const;

 private:
  // One file as a process chose it for a SONAME (interned: a thousand hosts of one
  // stack share a few hundred of these).
  struct Choice {
    std::string path, soname, identity, build_id, version, loaded_by, found_by;
    bool preload = false;
  };
  struct Proc {
    uint32_t host = 0, program = 0, pid = 0, stream = 0, exe = 0;
    // Rank variables as recorded ("" when unset), LD_PRELOAD and LD_LIBRARY_PATH.
    uint32_t rank = 0, local_rank = 0, ld_preload = 0, ld_library_path = 0;
    long rank_number = -1;  // for ordering: RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK
    size_t order = 0;       // the order processes were added in
    std::vector<std::pair<uint32_t, uint32_t>> libs;  // (soname, choice), by soname id
  };
  // A SONAME one program's processes disagree on (fleet.cc).
  struct Disagreement;
  // For one SONAME: file identity -> the processes that loaded that file.
  using Votes = std::map<std::string, std::vector<const Proc*>>;
  // Disagreements grouped by their odd processes (by order): one finding per group.
  using ByOddSet = std::map<std::vector<size_t>, std::vector<Disagreement>>;

  uint32_t Intern(const std::string& s);
  uint32_t InternChoice(Choice c);
  const std::string& S(uint32_t id) const { return strings_[id]; }
  std::string Who(const Proc& p, bool with_pid) const;
  // Find's steps, one program at a time (fleet.cc).
  static bool ByOrder(const Proc* a, const Proc* b);
  static v1::Library LibraryOf(const Choice& c);
  const Choice& ChoiceOf(const Proc& p, uint32_t soname) const;
  std::vector<std::string> HostsOf(const std::vector<const Proc*>& ps) const;
  ByOddSet DisagreementsOf(const std::vector<const Proc*>& members) const;
  bool Tally(uint32_t soname, const Votes& by_file, Disagreement* d) const;
  v1::Finding Mismatch(uint32_t program, size_t processes, size_t hosts,
                       const std::vector<Disagreement>& ds) const;
  std::string MismatchHeadline(const std::vector<Disagreement>& ds, size_t hosts) const;
  void AddChoiceDetails(FindingBuilder* f, const Disagreement& d) const;
  void AddEnvironmentDetails(FindingBuilder* f, const Disagreement& d0) const;
  void AddMismatchFixes(FindingBuilder* f, const std::vector<Disagreement>& ds) const;

  text::StringPool strings_;
  std::unordered_map<std::string, uint32_t> choice_ids_;
  std::vector<Choice> choices_;
  std::vector<std::string> hosts_;  // by host id
  std::vector<Proc> procs_;
  std::unordered_map<std::string, std::string> versions_;  // path -> version (files here)
};

}  // namespace ldscope::analysis
