// Renderers: turn timeline, report, diff and lock messages into text for people, JSON,
// GitHub annotations, JUnit XML or a Chrome trace for machines. No analysis happens
// here; nothing else prints.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "ldscope_proto/diff.pb.h"
#include "ldscope_proto/lock.pb.h"
#include "ldscope_proto/report.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::render {

// Any message as JSON, pretty-printed, with a trailing newline: every field (a message
// not set is null; of a oneof, the member set), names as in protobuf's JSON mapping
// (lowerCamelCase), enums as their words (EnumWord), 64-bit integers as strings, maps
// sorted by key, so the same message prints the same bytes.
std::string Json(const google::protobuf::Message& m);
// protobuf's proto3 JSON mapping of a message (enum names, defaults left out), which
// JsonStringToMessage reads back: `show --format json`, the timeline as data (its byte
// strings escaped first: ShownTimeline).
std::string ProtoJson(const google::protobuf::Message& m);

// The model's messages hold file names, argv and environments as bytes; a message made
// of them turns into text here: every string field of m, and of the messages in it,
// escaped (text::Escape), except the fields and messages named in text (full names),
// which hold text already.
void EscapeByteFields(google::protobuf::Message* m, std::initializer_list<std::string_view> text);
// A copy of the timeline with its byte strings escaped (all but its problems, which are
// text): what the renderers that do not escape field by field (JUnit, Chrome, OTLP) read.
v1::Timeline ShownTimeline(const v1::Timeline& t);

// The version of docs/report.schema.json that ReportJson follows: its major number
// changes when a field changes meaning or goes, its minor number when one is added.
inline constexpr const char* kReportSchemaVersion = "1.1";
// A report's counts (the text report's last line, the JSON's summary).
v1::Summary Summarise(const v1::Report& r);
// A report as `report --format json` prints it: Json of it with its schema version, the
// ldscope version and its summary set.
std::string ReportJson(const v1::Report& r);

struct TextOptions {
  bool timestamps = true;  // "+1.234ms" columns (off for golden files)
  bool verbose = false;    // list every unload at exit and every reuse
  bool problems = true;    // end with the trace problems ("error: ..." lines)
};
std::string TimelineText(const v1::Timeline& t, const TextOptions& opt);
// The same text, handed to sink piece by piece (a process image at a time), so that a
// big timeline is printed as it is rendered; stops at the first false from sink.
bool TimelineText(const v1::Timeline& t, const TextOptions& opt,
                  const std::function<bool(const std::string&)>& sink);
// The same text in its parts, for a timeline whose processes are not held together
// (model::BuildTimeline with ProcessParts): each process block, in order, as its parts
// arrive (Part: the head the first time, then the entries; Complete: the entries left
// and the end, after which the writer takes the next process), then the tail (the
// collector's summary and the problems of t).
class ProcessTextWriter {
 public:
  using Sink = std::function<bool(const std::string&)>;
  ProcessTextWriter(const TextOptions& opt, Sink sink) : opt_(opt), sink_(std::move(sink)) {}
  // False once the sink failed.
  bool Part(const v1::ProcessTimeline& p);
  bool Complete(const v1::ProcessTimeline& p);

 private:
  TextOptions opt_;
  Sink sink_;
  bool begun_ = false;
  size_t exit_unloads_ = 0;  // of the process being written
  std::string out_;
};
bool TimelineTailText(const v1::Timeline& t, const TextOptions& opt,
                      const std::function<bool(const std::string&)>& sink);

// One finding: a header line and the wrapped message.
std::string FindingText(const v1::Finding& f);
// The diagnosis: a paragraph per finding, then the notes and a count line ("no
// findings" when there is none). colour: each severity in its colour and each headline
// in bold (ANSI escapes), for a terminal.
std::string ReportText(const v1::Report& r, bool colour = false);
// Its last part: the notes and the count line.
std::string ReportTail(const v1::Report& r, bool colour = false);
// What changed between two traces: a block per process, then findings new and resolved.
std::string DiffText(const v1::Diff& d);
// `ldscope check --lock`: one line per difference ("~ libnccl.so.2 version: A -> B"),
// and the differences as a block per program with a count line naming the lock.
std::string LockDifferenceLine(const v1::LockDifference& d);
std::string LockCheckText(const v1::LockCheck& c, const std::string& lock_name);
// GitHub Actions: one ::error annotation per lock difference.
std::string GithubLockAnnotations(const v1::LockCheck& c, const std::string& lock_name);
// The same as a Markdown table for $GITHUB_STEP_SUMMARY ("match" when there are none).
std::string GithubLockSummary(const v1::LockCheck& c, const std::string& lock_name);
// GitHub Actions: one workflow-command annotation per finding (error, warning,
// notice), and a Markdown section for $GITHUB_STEP_SUMMARY.
// workspace: $GITHUB_WORKSPACE; a finding loaded from a Python line of a file under it
// is annotated at that file and line (file= relative to it).
std::string GithubAnnotations(const v1::Report& r, const std::string& workspace = "");
std::string GithubSummary(const v1::Report& r, const std::string& title);
// JUnit XML (GitLab, Jenkins, Buildkite, Azure Pipelines): a <testsuite> per traced
// program, a <testcase> per process with pid, rank and trace file as properties; a
// <failure> with the failing findings' text and evidence, the other findings in
// <system-out>; damaged traces as <error>s.
struct JunitInput {
  std::map<uint32_t, std::string> trace_of_stream;   // store::TraceFilesByStream
  std::function<bool(const v1::Finding&)> fails;     // which findings fail their case
};
std::string Junit(const v1::Timeline& t, const v1::Report& r, const JunitInput& in);
// The Chrome trace-event format of a timeline, with findings as markers.
std::string ChromeTrace(const v1::Timeline& t, const v1::Report& findings);
// "missing-symbol", "duplicate-library", ... (the names --fail-on takes).
std::string FindingKindName(v1::FindingKind k);
// "error", "warning", "info" (the text report's and the step summary's word).
std::string SeverityWord(v1::Severity s);

}  // namespace ldscope::render
