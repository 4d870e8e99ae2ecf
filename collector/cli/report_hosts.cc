// `report` over traces of several hosts (`ldscope report host-a/ host-b/ ...`): the
// inputs are grouped by the host that wrote them, each host's traces are loaded,
// analysed and dropped before the next host's (so a thousand hosts cost one host's
// memory, plus a summary per process and the object files read, which all hosts share),
// then the processes of all hosts are compared (analysis/fleet.cc).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/analysis.h"
#include "analysis/fleet.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "model/timeline.h"
#include "store/trace_file.h"
#include "store/trace_header.h"
#include "text/escape.h"
#include "text/shown.h"
#include "text/timer.h"

namespace ldscope::cli {
namespace {

// The row of `report --perf` that the pass over several hosts' contexts adds its time
// to: the registry's "fleet" pass (registry.cc).
constexpr const char* kFleetPhase = "pass fleet";

// The host a trace file names in its header (bytes, as every name), or "" when the file has none or
// its header cannot be read (the file is then named when it is loaded).
std::string HostOf(const std::string& path) {
  v1::TraceHeader h;
  return store::ReadTraceHeader(path, &h) == store::HeaderRead::kParsed ? h.host() : "";
}

// The label of an input whose files name no host: its last path component, without
// ".ldscope".
std::string InputLabel(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  if (slash != std::string::npos && slash + 1 < p.size()) p = p.substr(slash + 1);
  if (p.size() > 8 && p.compare(p.size() - 8, 8, ".ldscope") == 0) p.resize(p.size() - 8);
  return p;
}

}  // namespace

std::vector<HostInput> GroupByHost(const std::vector<std::string>& inputs, std::vector<std::string>* errors) {
  std::vector<HostInput> hosts;
  std::map<std::string, size_t> index;
  auto add = [&](const std::string& file, const std::string& input) {
    std::string label = HostOf(file);
    if (label.empty()) label = InputLabel(input);
    auto [it, added] = index.emplace(label, hosts.size());
    if (added) hosts.push_back({label, {}});
    hosts[it->second].files.push_back(file);
  };
  for (const auto& p : inputs) {
    struct stat st {};
    if (stat(p.c_str(), &st) != 0) {
      errors->push_back(fmt::format("{}: {}", text::Escape(p), std::strerror(errno)));
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      add(p, p);
      continue;
    }
    const Result<std::vector<std::string>> names = store::TraceNamesIn(p);
    if (!names.ok()) {
      errors->push_back(names.error());
      continue;
    }
    for (const auto& n : *names) add(p + (p.back() == '/' ? "" : "/") + n, p);
  }
  return hosts;
}

int ReportHosts(const ReportOptions& opt, std::vector<HostInput> hosts, const std::vector<std::string>& errors) {
  if (!opt.junit.empty()) {
    Complain(text::Show("--junit: not available for traces of several hosts ({} here: {}, {}, ...); "
                        "report each host's traces on its own",
                        hosts.size(), hosts[0].label, hosts[1].label)
                 .str());
    return kUsage;
  }
  std::sort(hosts.begin(), hosts.end(), [](const HostInput& a, const HostInput& b) { return a.label < b.label; });
  for (const auto& e : errors) Complain(e);
  bool damaged = !errors.empty();
  // Each object file is read once for all hosts (`files`); each host answers from its own
  // traces' facts where the file here is missing or another (a view of its own).
  analysis::Files files;
  analysis::Fleet fleet;
  v1::Report all;
  std::vector<std::string> skipped;
  std::map<std::string, std::string> unreadable;  // every host's, path -> error
  // On a terminal: the hosts analysed so far (progress.h), erased before anything else
  // is written to stderr.
  std::optional<Progress> progress(std::in_place, "report", "hosts analysed");
  for (size_t host_no = 0; host_no < hosts.size(); ++host_no) {
    auto& host = hosts[host_no];
    progress->Count(host_no, hosts.size());
    v1::Report r;
    {
      const store::TraceSet traces = text::Timed("read", [&] { return store::LoadTracesIndexed(host.files); });
      const v1::Timeline timeline = text::Timed("model", [&] { return model::BuildTimeline(traces); });
      if (timeline.problems_size() > 0) {
        progress.reset();
        progress.emplace("report", "hosts analysed");
      }
      for (const auto& p : timeline.problems()) ComplainDamage(p.file(), p.offset(), p.message(), "analysing");
      damaged |= timeline.problems_size() > 0;
      if (!store::AnyReadable(traces)) {
        skipped.push_back(host.label);
        continue;
      }
      const elf::TraceFacts facts = text::Timed("facts", [&] { return analysis::FactsOf(traces); });
      analysis::Files view(&files);
      const auto add_to_fleet = [&](analysis::Context& ctx) {
        text::Timed(kFleetPhase, [&] { fleet.Add(ctx, host.label); });
      };
      if (opt.across_hosts_only) {
        analysis::Context ctx(timeline, &facts, &view);
        add_to_fleet(ctx);
      } else {
        r = analysis::Analyze(timeline, &facts, &view, add_to_fleet);
      }
      unreadable.insert(view.errors().begin(), view.errors().end());
    }
    for (auto& f : *r.mutable_findings()) {
      f.set_host(text::Escape(host.label));  // a finished finding is text
      *all.add_findings() = std::move(f);
    }
    // The note on unreadable object files is about this machine's disk, not a host: it
    // comes once, at the end.
    static const std::regex unreadable("^[0-9]+ object files? could not be read");
    for (const auto& n : r.notes())
      if (!std::regex_search(n, unreadable))
        all.add_notes(text::Show("host {}: {}", host.label, text::Shown::Escaped(n)).str());
  }
  progress.reset();
  if (!skipped.empty())
    Complain(text::Show("no trace of host{} {} could be read: left out of the report", skipped.size() == 1 ? "" : "s",
                        fmt::join(skipped, ", "))
                 .str());
  if (fleet.hosts() == 0) return NoTrace();
  text::Timed(kFleetPhase, [&] { fleet.Find(&all); });
  if (std::string n = analysis::UnreadableFilesNote(unreadable); !n.empty()) all.add_notes(n);
  all.add_notes(fmt::format("{} hosts compared ({} processes): {} program{} ran on more than one host", fleet.hosts(),
                            fleet.processes(), fleet.SharedPrograms(), fleet.SharedPrograms() == 1 ? "" : "s"));
  const int rc = EmitAnalysed(all, nullptr, opt, stdout, PrintWhen::kAlways);
  if (rc != kOk) return rc;
  return damaged ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
