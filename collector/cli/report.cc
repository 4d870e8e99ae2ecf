// `ldscope report`, and the diagnosis `run` prints after the command: analyse traces,
// render the findings, and decide the --fail-on exit status.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"
#include "text/escape.h"

namespace ldscope::cli {
namespace {

const std::set<std::string>& FailOnWords() {
  static const std::set<std::string> words = {
      "any", "error", "warning", "duplicate-library", "duplicate-info", "shadowed-dependency",
      "search-order-shadowing", "missing-symbol", "missing-library"};
  return words;
}

bool Matches(const v1::Finding& f, const std::string& word) {
  if (word == "any") return true;
  if (word == "error") return f.severity() == v1::ERROR;
  if (word == "warning") return f.severity() >= v1::WARNING;
  return render::FindingKindName(f.kind()) == word;
}

}  // namespace

std::string CheckFailOn(const std::vector<std::string>& words) {
  for (const auto& w : words)
    if (!FailOnWords().count(w)) {
      std::string all;
      for (const auto& x : FailOnWords()) all += (all.empty() ? "" : ", ") + x;
      return fmt::format("--fail-on: unknown kind '{}' (one of: {})", w, all);
    }
  return "";
}

int EmitReport(const v1::Timeline& timeline, const ReportOptions& opt, std::FILE* default_out,
               PrintWhen when) {
  const v1::Report report = analysis::Analyze(timeline);
  const std::string text =
      opt.format == "json" ? render::Json(report) : render::ReportText(report);
  bool worth_printing = when == PrintWhen::kAlways || opt.format == "json" || report.notes_size() > 0;
  for (const auto& f : report.findings())
    worth_printing |= when == PrintWhen::kFindings || f.severity() >= v1::WARNING;
  if (!opt.output.empty()) {
    std::ofstream f(opt.output, std::ios::trunc);
    f << text;
    if (!f) {
      Complain("cannot write the report to " + opt.output);
      return kUsage;
    }
  } else if (worth_printing) {
    std::fputs(text.c_str(), default_out);
    std::fflush(default_out);
  }
  const char* gha = std::getenv("GITHUB_ACTIONS");
  if (opt.github || (gha != nullptr && std::string(gha) == "true")) {
    // Annotations go where the diagnosis goes (stderr for run: the command's stdout
    // stays its own); the summary is appended to the step's summary file.
    std::fputs(render::GithubAnnotations(report).c_str(), default_out);
    std::fflush(default_out);
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary != nullptr && *summary) {
      std::ofstream s(summary, std::ios::app);
      s << render::GithubSummary(report, opt.title);
      if (!s) Complain(fmt::format("cannot append to GITHUB_STEP_SUMMARY={}", summary));
    }
  }
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
  const store::TraceSet traces = store::LoadTraces(opt.traces);
  const v1::Timeline timeline = model::BuildTimeline(traces);
  for (const auto& p : timeline.problems())
    Complain(p.file().empty() ? p.message()
                              : fmt::format("{}: at byte offset {}: {} (analysing what precedes it)",
                                            p.file(), p.offset(), p.message()));
  if (traces.files.empty()) return kUsage;
  const int rc = EmitReport(timeline, ropt, stdout, PrintWhen::kAlways);
  if (rc != kOk) return rc;
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
