// `ldscope report`, and the diagnosis `run` prints after the command: analyse traces,
// render the findings, and decide the --fail-on exit status.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/output_file.h"
#include "store/trace_file.h"
#include "text/escape.h"

namespace ldscope::cli {
namespace {

// Every finding kind's name (from the schema's enum, so a new kind is never missing),
// then the severities.
const std::vector<std::string>& FailOnWords() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> w;
    const auto* kinds = v1::FindingKind_descriptor();
    for (int i = 0; i < kinds->value_count(); ++i)
      if (kinds->value(i)->number() != v1::FINDING_KIND_UNSPECIFIED)
        w.push_back(render::FindingKindName(static_cast<v1::FindingKind>(kinds->value(i)->number())));
    w.insert(w.end(), {"error", "warning", "any"});
    return w;
  }();
  return words;
}

bool Matches(const v1::Finding& f, const std::string& word) {
  if (word == "any") return true;
  if (word == "error") return f.severity() == v1::ERROR;
  if (word == "warning") return f.severity() >= v1::WARNING;
  return render::FindingKindName(f.kind()) == word;
}

// JUnit: error findings fail their process's test case, and so does anything
// --fail-on names (CI then shows in red what made the job fail).
std::string WriteJunit(const v1::Timeline& timeline, const v1::Report& report,
                       const ReportOptions& opt) {
  render::JunitInput in;
  in.trace_of_stream = opt.trace_of_stream;
  in.fails = [&opt](const v1::Finding& f) {
    if (f.severity() == v1::ERROR) return true;
    for (const auto& w : opt.fail_on)
      if (Matches(f, w)) return true;
    return false;
  };
  const std::string xml = render::Junit(timeline, report, in);
  std::FILE* f = std::fopen(opt.junit.c_str(), "w");
  if (f == nullptr)
    return fmt::format("cannot write the JUnit report to {}: {}", opt.junit, std::strerror(errno));
  const bool written = std::fwrite(xml.data(), 1, xml.size(), f) == xml.size();
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written)
    return fmt::format("cannot write the JUnit report to {}: {}", opt.junit,
                       std::strerror(written ? errno : write_errno));
  return "";
}

}  // namespace

std::string FailOnHelp() {
  return fmt::format("{}", fmt::join(FailOnWords(), ", "));
}

std::string CheckFailOn(const std::vector<std::string>& words) {
  const auto& known = FailOnWords();
  for (const auto& w : words)
    if (std::find(known.begin(), known.end(), w) == known.end())
      return fmt::format("--fail-on: unknown kind '{}' (one of: {})", w, FailOnHelp());
  return "";
}

int EmitReport(const v1::Timeline& timeline, const ReportOptions& opt, std::FILE* default_out,
               PrintWhen when) {
  return EmitAnalysed(analysis::Analyze(timeline, opt.facts), &timeline, opt, default_out, when);
}

int EmitAnalysed(const v1::Report& report, const v1::Timeline* timeline, const ReportOptions& opt,
                 std::FILE* default_out, PrintWhen when) {
  if (!opt.junit.empty() && timeline != nullptr) {
    if (std::string e = WriteJunit(*timeline, report, opt); !e.empty()) {
      Complain(e);
      return kUsage;
    }
  }
  if (when == PrintWhen::kNever) return kOk;
  const std::string text =
      opt.format == "json" ? render::Json(report) : render::ReportText(report);
  bool worth_printing = when == PrintWhen::kAlways || opt.format == "json" || report.notes_size() > 0;
  for (const auto& f : report.findings())
    worth_printing |= when == PrintWhen::kFindings || f.severity() >= v1::WARNING;
  int rc = kOk;
  if (!opt.output.empty()) {
    if (std::string e = store::WriteTextFile(opt.output, text); !e.empty()) {
      Complain("the report: " + e);
      rc = kWriteFailed;
    }
  } else if (worth_printing && !Print(default_out, text)) {
    rc = kWriteFailed;
  }
  const char* gha = std::getenv("GITHUB_ACTIONS");
  if (opt.github || (gha != nullptr && std::string(gha) == "true")) {
    // Annotations go where the diagnosis goes (stderr for run: the command's stdout
    // stays its own); the summary is appended to the step's summary file.
    if (!Print(default_out, render::GithubAnnotations(report))) rc = kWriteFailed;
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary != nullptr && *summary) {
      std::ofstream s(summary, std::ios::app);
      s << render::GithubSummary(report, opt.title);
      s.close();
      if (!s) Complain(fmt::format("cannot append to GITHUB_STEP_SUMMARY={}", summary));
    }
  }
  if (rc != kOk) return rc;
  for (const auto& f : report.findings())
    for (const auto& w : opt.fail_on)
      if (Matches(f, w)) return kFindings;
  return kOk;
}

int Report(const ReportCommandOptions& opt) {
  if (std::string e = CheckFailOn(opt.report.fail_on); !e.empty()) {
    Complain(e);
    return kUsage;
  }
  ReportOptions ropt = opt.report;
  for (const auto& t : opt.traces) ropt.title += (ropt.title.empty() ? "" : " ") + text::Escape(t);
  if (std::string e = RefuseOverwrite(opt.report.output, opt.traces); !e.empty()) {
    Complain(e);
    return kUsage;
  }
  // Traces of several hosts: one host at a time, then across them (report_hosts.cc).
  std::vector<std::string> errors;
  std::vector<HostInput> hosts = GroupByHost(opt.traces, &errors);
  if (hosts.size() > 1) return ReportHosts(ropt, std::move(hosts), errors);
  const store::TraceSet traces = store::LoadTraces(opt.traces);
  const v1::Timeline timeline = model::BuildTimeline(traces);
  ropt.trace_of_stream = store::TraceFilesByStream(traces);
  const elf::TraceFacts facts = analysis::FactsOf(traces);
  ropt.facts = &facts;
  for (const auto& p : timeline.problems())
    Complain(p.file().empty() || p.offset() == 0
                 ? fmt::format("{}{}{}", p.file(), p.file().empty() ? "" : ": ", p.message())
                 : fmt::format("{}: at byte offset {}: {} (analysing what precedes it)",
                                            p.file(), p.offset(), p.message()));
  if (!store::AnyReadable(traces)) return NoTrace();
  const int rc = EmitReport(timeline, ropt, stdout, PrintWhen::kAlways);
  if (rc != kOk) return rc;
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
