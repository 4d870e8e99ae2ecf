// `ldscope snapshot PID...`: read what running processes have loaded (their link maps,
// collector/snapshot/) without stopping them, write it as a trace, and print the
// diagnosis of what a snapshot can know.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "analysis/mounts.h"
#include "analysis/owners.h"
#include "analysis/record_facts.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "model/timeline.h"
#include "snapshot/snapshot.h"
#include "store/output_file.h"
#include "store/trace_file.h"
#include "text/escape.h"

namespace ldscope::cli {
namespace {

uint64_t MonoNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

// The processes asked for, each once, in the order given. Explicit pids must all be
// read; those found by --tree or --all-python may end before they are read.
struct Targets {
  std::vector<pid_t> pids;
  std::set<pid_t> found;  // found by --tree or --all-python
};

Targets Gather(const SnapshotOptions& opt) {
  Targets t;
  std::set<pid_t> seen;
  auto add = [&](pid_t p, bool found) {
    if (!seen.insert(p).second) return;
    t.pids.push_back(p);
    if (found) t.found.insert(p);
  };
  for (int p : opt.pids) add(p, false);
  for (int root : opt.tree) {
    const std::vector<pid_t> tree = snapshot::Tree(root);
    for (size_t i = 0; i < tree.size(); ++i) add(tree[i], i > 0);
  }
  if (opt.all_python)
    for (pid_t p : snapshot::PythonProcesses()) add(p, true);
  return t;
}

bool Gone(const std::string& error) {
  return error.find(": no such process") != std::string::npos ||
         error.find("ended while it was read") != std::string::npos ||
         error.find(": it has ended") != std::string::npos;
}

// The ELF facts, noexec mounts and owners of every object read, as `run` adds them.
void AddFacts(const std::vector<snapshot::Process>& read, store::TraceWriter& writer) {
  std::set<std::string> paths, dirs;
  for (const auto& p : read)
    for (const auto& o : p.objects)
      if (!o.is_vdso && !o.path.empty() && o.path.front() == '/') {
        paths.insert(o.path);
        dirs.insert(o.path.substr(0, std::max<size_t>(1, o.path.rfind('/'))));
      }
  const analysis::RecordedFacts facts = analysis::RecordFacts(paths, kFactsLimitMs);
  v1::Event e;
  e.set_pid(static_cast<uint32_t>(getpid()));
  auto append = [&]() {
    const std::string bytes = e.SerializeAsString();
    // The writer counts a failed write; Close reports it.
    writer.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0).IgnoreError();
  };
  for (const auto& r : facts.records) {
    *e.mutable_object_facts() = r;
    append();
  }
  for (const auto& m : analysis::NoexecMounts(dirs)) {
    *e.mutable_mount_facts() = m;
    append();
  }
  for (const auto& o : analysis::RecordOwners(paths)) {
    *e.mutable_owner_facts() = o;
    append();
  }
}

// Reads every target into *read: kOk, or kUsage (complained) when one could not be read
// or none was left to read. A process found by --tree or --all-python that ended before
// it was read is left out, and said so.
int ReadAll(const Targets& targets, std::vector<snapshot::Process>* read) {
  std::vector<std::string> failed, gone;
  for (pid_t pid : targets.pids) {
    Result<snapshot::Process> p = snapshot::Read(pid);
    if (p.ok()) {
      read->push_back(std::move(p).value());
    } else if (targets.found.count(pid) != 0 && Gone(p.error())) {
      gone.push_back(p.error());
    } else {
      failed.push_back(p.error());
    }
  }
  for (const auto& g : gone) Complain("snapshot: " + g + " (left out)");
  if (!failed.empty()) {
    for (const auto& f : failed) Complain("snapshot: " + f);
    Complain(fmt::format("snapshot: {} of {} process{} could not be read; no trace written", failed.size(),
                         targets.pids.size(), targets.pids.size() == 1 ? "" : "es"));
    return kUsage;
  }
  if (read->empty()) {
    Complain("snapshot: every process ended before it was read; no trace written");
    return kUsage;
  }
  return kOk;
}

}  // namespace

int Snapshot(const SnapshotOptions& opt) {
  const uint64_t t0 = MonoNs();
  const Targets targets = Gather(opt);
  if (targets.pids.empty()) {
    Complain(opt.all_python ? "snapshot: no Python process of this user is running"
                            : "snapshot: no process given (PID..., --tree PID or --all-python)");
    return kUsage;
  }
  const std::string output = opt.output.empty() ? DefaultTraceName("ldscope-snapshot") : opt.output;
  if (Status s = store::CheckOutputs({{"-o", output}, {"--report", opt.report.output}}, {}); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  // Every process first: a refusal or a failure leaves no trace at all (and an existing
  // file of that name as it was), never a trace that looks whole without it.
  std::vector<snapshot::Process> read;
  if (const int rc = ReadAll(targets, &read); rc != kOk) return rc;
  const uint64_t t_read = MonoNs();
  store::TraceWriter writer;
  const bool analyse = opt.analyse || !opt.report.junit.empty();
  if (analyse) writer.KeepCopy();
  if (Status s = writer.Open(output, NewTraceHeader()); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  size_t objects = 0;
  for (size_t i = 0; i < read.size(); ++i) {
    objects += read[i].objects.size();
    for (const auto& e : snapshot::ToEvents(read[i])) {
      const std::string bytes = e.SerializeAsString();
      writer.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), static_cast<uint32_t>(i + 1))
          .IgnoreError();  // Close reports a failed write
    }
  }
  const uint64_t t_events = MonoNs();
  if (opt.facts) AddFacts(read, writer);
  const Status closed = writer.Close();
  const uint64_t t_written = MonoNs();
  if (!closed.ok()) Complain(closed.error());
  int retried = 0;
  for (const auto& p : read) retried += p.tries > 1;
  if (!opt.quiet || !closed.ok()) {
    std::string line =
        fmt::format("snapshot of {} process{} ({} objects) read in {:.1f} ms, written in {:.1f} ms{}; trace {}",
                    read.size(), read.size() == 1 ? "" : "es", objects, (t_read - t0) / 1e6, (t_written - t_read) / 1e6,
                    opt.facts ? fmt::format(" (facts {:.1f} ms)", (t_written - t_events) / 1e6) : "",
                    output == "-" ? "on standard output" : text::Escape(output));
    if (retried > 0)
      line += fmt::format("; {} process{} changed while reading, retried", retried, retried == 1 ? "" : "es");
    Complain(line);
  }
  if (!closed.ok()) return kWriteFailed;
  if (!analyse) return kOk;
  const store::TraceSet traces = store::LoadTraceImage(output, writer.copy());
  const v1::Timeline timeline = model::BuildTimeline(traces);
  const elf::TraceFacts facts = analysis::FactsOf(traces);
  ReportOptions ropt = opt.report;
  ropt.trace_of_stream = store::TraceFilesByStream(traces);
  ropt.facts = &facts;
  if (ropt.title.empty()) ropt.title = "snapshot";
  // The report goes where a trace on standard output is not.
  std::FILE* out = output == "-" || store::SameFile(output, "-") ? stderr : stdout;
  return EmitReport(timeline, ropt, out, opt.analyse ? PrintWhen::kAlways : PrintWhen::kNever);
}

}  // namespace ldscope::cli
