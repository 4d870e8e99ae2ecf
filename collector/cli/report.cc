// `ldscope report`, and the diagnosis `run` prints after the command: analyse traces,
// render the findings, and decide the --fail-on exit status.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/analysis.h"
#include "analysis/registry.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/output_file.h"
#include "store/trace_file.h"
#include "text/escape.h"
#include "text/timer.h"

namespace ldscope::cli {
namespace {

// The word of every finding kind a pass reports (the pass registry's), then the
// severities.
const std::vector<std::string>& FailOnWords() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> w;
    for (v1::FindingKind k : analysis::ReportedKinds()) w.push_back(render::FindingKindName(k));
    w.insert(w.end(), {"error", "warning", "any"});
    return w;
  }();
  return words;
}

// JUnit: error findings fail their process's test case, and so does anything
// --fail-on names (CI then shows in red what made the job fail).
Status WriteJunit(const v1::Timeline& timeline, const v1::Report& report,
                  const ReportOptions& opt) {
  render::JunitInput in;
  in.trace_of_stream = opt.trace_of_stream;
  in.fails = [&opt](const v1::Finding& f) {
    if (f.severity() == v1::ERROR) return true;
    for (const auto& w : opt.fail_on)
      if (FailOnMatches(f, w)) return true;
    return false;
  };
  return store::WriteTextFile(opt.junit, render::Junit(timeline, report, in));
}

// --perf: the phases' rows named up front, in the order they run, every registered pass
// among them (one that did not run shows a count of 0); the table printed on stderr when
// the command ends, after the report.
class PhaseTimes {
 public:
  explicit PhaseTimes(bool on) : on_(on) {
    if (!on_) return;
    text::EnablePhaseTimes();
    for (const char* phase : {"read", "facts", "model", "files"}) text::NamePhase(phase);
    for (const analysis::RegisteredPass& p : analysis::Passes()) text::NamePhase(analysis::PassPhase(p));
    text::NamePhase("notes");
    text::NamePhase("render");
  }
  ~PhaseTimes() {
    if (on_) std::fputs(text::PhaseTimesTable().c_str(), stderr);
  }
  PhaseTimes(const PhaseTimes&) = delete;
  PhaseTimes& operator=(const PhaseTimes&) = delete;

 private:
  bool on_;
};

}  // namespace

bool Colour(const ReportOptions& opt, std::FILE* out) {
  if (opt.color == "always") return opt.output.empty();
  if (opt.color == "never" || !opt.output.empty() || isatty(fileno(out)) == 0) return false;
  const char* no_color = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  return (no_color == nullptr || *no_color == '\0') && (term == nullptr || std::string_view(term) != "dumb");
}

bool FailOnMatches(const v1::Finding& f, const std::string& word) {
  if (word == "any") return true;
  if (word == "error") return f.severity() == v1::ERROR;
  if (word == "warning") return f.severity() >= v1::WARNING;
  return render::FindingKindName(f.kind()) == word;
}

std::string FailOnHelp() {
  return fmt::format("{}", fmt::join(FailOnWords(), ", "));
}

Status CheckFailOn(const std::string& word) {
  const auto& known = FailOnWords();
  if (std::find(known.begin(), known.end(), word) == known.end())
    return Error{fmt::format("unknown kind '{}' (one of: {})", word, FailOnHelp())};
  return Status::Ok();
}

int EmitReport(const v1::Timeline& timeline, const ReportOptions& opt, std::FILE* default_out,
               PrintWhen when) {
  return EmitAnalysed(analysis::Analyze(timeline, opt.facts, opt.files, {}), &timeline, opt, default_out, when);
}

// GitHub Actions: the annotations on out, the summary appended to the step's summary
// file. kOk, or kWriteFailed (complained).
static int EmitGithub(const v1::Report& report, const ReportOptions& opt, std::FILE* out) {
  int rc = kOk;
  const char* workspace = std::getenv("GITHUB_WORKSPACE");
  if (!Print(out, render::GithubAnnotations(report, workspace != nullptr ? workspace : ""))) rc = kWriteFailed;
  if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary != nullptr && *summary) {
    if (Status s = store::WriteTextFile(summary, render::GithubSummary(report, opt.title), store::OutputMode::kAppend);
        !s.ok()) {
      Complain("GITHUB_STEP_SUMMARY: " + s.error());
      rc = kWriteFailed;
    }
  }
  return rc;
}

int EmitAnalysed(const v1::Report& report, const v1::Timeline* timeline, const ReportOptions& opt,
                 std::FILE* default_out, PrintWhen when) {
  if (!opt.junit.empty() && timeline != nullptr) {
    if (Status s = WriteJunit(*timeline, report, opt); !s.ok()) {
      Complain("the JUnit report: " + s.error());
      return kWriteFailed;
    }
  }
  if (when == PrintWhen::kNever) return kOk;
  text::PhaseTimer timer("render");
  const char* gha = std::getenv("GITHUB_ACTIONS");
  const bool github = opt.github || (gha != nullptr && std::string(gha) == "true");
  // On GitHub each finding is printed once, as its annotation (which holds the same
  // lines); the text printed beside it keeps the notes and the counts.
  const bool annotated = github && opt.output.empty() && opt.format != "json";
  const bool colour = Colour(opt, default_out);
  const std::string text = opt.format == "json" ? render::ReportJson(report)
                           : annotated          ? render::ReportTail(report, colour)
                                                : render::ReportText(report, colour);
  // kFindings prints a clean report too: its last line says "no findings".
  bool worth_printing =
      when == PrintWhen::kAlways || when == PrintWhen::kFindings || opt.format == "json" || report.notes_size() > 0;
  for (const auto& f : report.findings()) worth_printing |= f.severity() >= v1::WARNING;
  // Annotations go where the diagnosis goes (stderr for run: the command's stdout
  // stays its own), before the counts that end it.
  int rc = github ? EmitGithub(report, opt, default_out) : kOk;
  if (!opt.output.empty()) {
    if (Status s = store::WriteTextFile(opt.output, text); !s.ok()) {
      Complain("the report: " + s.error());
      rc = kWriteFailed;
    }
  } else if (worth_printing && !Print(default_out, text)) {
    rc = kWriteFailed;
  }
  if (rc != kOk) return rc;
  for (const auto& f : report.findings())
    for (const auto& w : opt.fail_on)
      if (FailOnMatches(f, w)) return kFindings;
  return kOk;
}

int Report(const ReportCommandOptions& opt) {
  ReportOptions ropt = opt.report;
  std::vector<std::string> titles;
  if (!ropt.title.empty()) titles.push_back(ropt.title);
  for (const auto& t : opt.traces) titles.push_back(text::Escape(t));
  ropt.title = fmt::format("{}", fmt::join(titles, " "));
  if (Status s = store::CheckOutputs({{"-o", opt.report.output}, {"--junit", opt.report.junit}}, opt.traces); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  if (RefuseTooLarge(opt.traces)) return kUsage;
  const PhaseTimes phase_times(opt.perf);
  // Traces of several hosts: one host at a time, then across them (report_hosts.cc).
  std::vector<std::string> errors;
  std::vector<HostInput> hosts = GroupByHost(opt.traces, &errors);
  if (hosts.size() > 1) return ReportHosts(ropt, std::move(hosts), errors);
  // On a terminal: the files read so far, then the phase (progress.h); erased before the
  // report prints.
  std::optional<Progress> progress(std::in_place, "report", "trace files read");
  store::TraceSet traces = text::Timed("read", [&] {
    return store::LoadTracesIndexed(opt.traces,
                                    [&progress](size_t done, size_t total) { progress->Count(done, total); });
  });
  progress->Say("analysing");
  ropt.trace_of_stream = store::TraceFilesByStream(traces);
  const elf::TraceFacts facts = text::Timed("facts", [&] { return analysis::FactsOf(traces); });
  ropt.facts = &facts;
  // The context takes each process as the model builds it, keeping its object table and
  // what the passes walk, not its millions of loads and unloads (a dlopen churn).
  v1::Timeline timeline;
  analysis::Context ctx(&timeline, &facts, ropt.files);
  text::Timed("model", [&] {
    model::BuildTimeline(
        traces, &timeline, [&ctx](const v1::ProcessTimeline& p, bool complete) { return ctx.AddPart(p, complete); },
        /*with_objects=*/true);
  });
  store::DropEvents(&traces);  // all the timeline, the streams and the facts needed of them
  const bool readable = store::AnyReadable(traces);
  v1::Report report;
  if (readable) report = analysis::Analyze(ctx);
  progress.reset();  // before anything else is written to stderr
  for (const auto& p : timeline.problems()) ComplainDamage(p.file(), p.offset(), p.message(), "analysing");
  if (!readable) return NoTrace();
  const int rc = EmitAnalysed(report, &timeline, ropt, stdout, PrintWhen::kAlways);
  if (rc != kOk) return rc;
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
