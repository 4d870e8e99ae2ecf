// One function per sub-command; main.cc wires them to CLI11.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "elf/facts.h"
#include "text/result.h"
#include "ldscope_proto/lock.pb.h"
#include "ldscope_proto/report.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::analysis {
class Files;
}

namespace ldscope::cli {

// Exit statuses of ldscope itself (run passes the command's own status through).
enum Exit : int {
  kOk = 0,
  kDamagedTrace = 1,  // show: a trace was truncated or corrupt (the rest is shown)
  kUsage = 2,         // bad arguments, unreadable input, cannot start
  kFindings = 3,      // run/report: findings matched --fail-on; check/run: not as locked
  kWriteFailed = 4,   // a trace, report or export could not be written completely
};

struct ReportOptions {
  std::string format = "text";         // text or json
  std::string output;                  // file; "" = stderr (run) or stdout (report)
  // --color: "always", "never", or "auto" (on a terminal, unless NO_COLOR is set and
  // not empty or TERM is dumb); never into a file.
  std::string color = "auto";
  std::vector<std::string> fail_on;    // kinds, "error", "warning" or "any"
  // GitHub Actions output (annotations, step summary): --github, or GITHUB_ACTIONS=true.
  bool github = false;
  std::string title;                   // the summary's heading (the command, the traces)
  std::string junit;                   // --junit FILE: JUnit XML for CI systems
  std::map<uint32_t, std::string> trace_of_stream;  // for --junit's trace property
  const elf::TraceFacts* facts = nullptr;  // the traces' ELF facts, for files gone or changed
  // `run`: the files its collector read (the analysis reads the others); nullptr: read them.
  analysis::Files* files = nullptr;
  // report over several hosts: only the comparison across hosts, not each host's own
  // diagnosis (--across-hosts-only).
  bool across_hosts_only = false;
};

struct RunOptions {
  std::string output;             // trace file; default ldscope-<time>-<pid>.ldscope
  bool quiet = false;
  bool analyse = true;            // print the diagnosis after the command
  bool python_hook = true;        // put the Python hook on PYTHONPATH
  bool facts = true;              // add the loaded files' ELF facts to the trace
  ReportOptions report;
  std::string lock;               // --lock FILE: check the trace against it afterwards
  bool ignore_build_id = false;
  bool keep_argv = false;  // record secret arguments' values (audit/redact.h)
  bool try_fixes = false;  // --try-fixes: run the command again per environment or import-order fix
  // --with-env VAR=VALUE (hidden; a trial of --try-fixes): the command's environment with
  // VAR set to VALUE, or without VAR when VALUE is empty; ldscope's own is left as it is.
  std::vector<std::string> with_env;
  std::vector<std::string> command;
};
int Run(const RunOptions& opt);
// LD_AUDIT's entries other than an ldscope audit library (ours, or another copy of it:
// a nested `ldscope run`, or a user's own LD_AUDIT), ':'-joined.
std::string OtherAuditors(const std::string& ld_audit);
// Our environment with "VAR=VALUE" changes (--with-env's) applied: VAR set to VALUE, or
// taken out when VALUE is empty.
std::vector<std::string> WithChanges(const std::vector<std::string>& with);
// The same, as a command runs without ldscope: no ldscope audit library in LD_AUDIT and
// none of the variables a traced process gets from `run` (what a nested run inherits).
std::vector<std::string> UntracedEnv(const std::vector<std::string>& with);
// `run --try-fixes` (try_fixes.cc): each environment and import-order fix of the report's
// error findings tried by running opt.command again with the change, traced; the fix's
// `verified` says what the trial showed. original_status: the command's wait status,
// original_seconds how long it ran.
void TryFixes(const RunOptions& opt, int original_status, double original_seconds, v1::Report* report);

struct CollectOptions {
  std::string socket;
  std::string output;
  bool quiet = false;
  bool facts = true;              // add the loaded files' ELF facts to the trace
  std::string otlp;     // --otlp http://HOST:PORT[/PATH]: stream OTLP while recording
};
int Collect(const CollectOptions& opt);

struct SnapshotOptions {
  std::vector<int> pids;
  std::vector<int> tree;    // --tree PID: the process and its descendants
  bool all_python = false;  // --all-python: this user's Python processes
  std::string output;       // trace file; default ldscope-snapshot-<time>-<pid>.ldscope
  bool quiet = false;
  bool analyse = true;  // print the diagnosis
  bool facts = true;    // add the loaded files' ELF facts to the trace
  ReportOptions report;
};
int Snapshot(const SnapshotOptions& opt);  // snapshot.cc

struct HookOptions {
  std::string action;              // "install" or "uninstall"
  std::string python = "python3";  // whose site-packages (found on PATH without a slash)
  std::string target;              // a site-packages directory, instead of asking python
  bool user = false;               // python's user site instead of its purelib
  bool quiet = false;
};
int Hook(const HookOptions& opt);  // hook.cc

struct ShowOptions {
  std::vector<std::string> traces;
  std::string format = "text";
  bool timestamps = true;
  bool verbose = false;
};
int Show(const ShowOptions& opt);

struct ReportCommandOptions {
  std::vector<std::string> traces;
  ReportOptions report;
  bool perf = false;  // each phase's and pass's time on stderr (--perf)
};
int Report(const ReportCommandOptions& opt);
// Inputs grouped by the host that wrote them (TraceHeader.host, else the input's
// name): each file of a directory input on its own. errors: inputs that could not be
// listed (missing, unreadable, a directory with no trace). report_hosts.cc
struct HostInput {
  std::string label;
  std::vector<std::string> files;
};
std::vector<HostInput> GroupByHost(const std::vector<std::string>& inputs, std::vector<std::string>* errors);
// `report` over two or more hosts: each host's traces analysed alone (findings carry the
// host), then the processes of all hosts compared (HOST_MISMATCH).
int ReportHosts(const ReportOptions& opt, std::vector<HostInput> hosts, const std::vector<std::string>& errors);

struct DiffOptions {
  std::string base, now;
  std::string format = "text";
  std::vector<std::string> fail_on;  // "new-findings", "changes"
};
int Diff(const DiffOptions& opt);

struct LockOptions {
  std::vector<std::string> traces;
  std::string output;  // "" or "-": standard output
};
int Lock(const LockOptions& opt);

struct CheckOptions {
  std::vector<std::string> traces;
  std::string lock;
  bool ignore_build_id = false;
  bool github = false;
};
int Check(const CheckOptions& opt);

// Compares what the timeline loaded with a lock: nothing printed and kOk when they
// match; else the differences (and, with github or GITHUB_ACTIONS=true, ::error
// annotations) on out, and kFindings (kWriteFailed when out cannot be written). With
// github, a table is also appended to $GITHUB_STEP_SUMMARY.
int CheckAgainstLock(const v1::Timeline& timeline, const v1::Lock& lock,
                     const std::string& lock_name, bool ignore_build_id, bool github,
                     std::FILE* out);

struct ExportOptions {
  std::vector<std::string> traces;
  bool chrome = false;
  std::string output;   // --chrome's JSON file
  std::string otlp;     // --otlp DIR or http://HOST:PORT[/PATH]
  std::string otlp_traces, otlp_logs;  // --otlp-traces FILE, --otlp-logs FILE
  bool otlp_http = false;              // --otlp-http: to the endpoint OTEL_EXPORTER_OTLP_*ENDPOINT names
};
int Export(const ExportOptions& opt);

struct ImportsOptions {
  std::vector<std::string> modules;
  std::string python = "python3";  // a bare name is looked up on PATH
  std::string format = "text";
  int jobs = 1;                      // orders run at once (main sets the CPUs' count)
  std::vector<std::string> fail_on;  // as run's; a failing order matches "error"
};
int Imports(const ImportsOptions& opt);

// Validates one --fail-on word (main.cc's CLI11 validator): a finding kind, "error",
// "warning" or "any".
Status CheckFailOn(const std::string& word);
// Whether the text report printed on out is coloured (ReportOptions::color).
bool Colour(const ReportOptions& opt, std::FILE* out);
// Whether a finding matches one --fail-on word.
bool FailOnMatches(const v1::Finding& f, const std::string& word);
// The words --fail-on takes, comma-separated (for --help).
std::string FailOnHelp();
// When the report goes to default_out (a --report file is always written).
enum class PrintWhen {
  kAlways,    // `report`
  kFindings,  // `run`: always (a clean report says "no findings")
  kProblems,  // `run -q`: only for warnings, errors and notes
  kNever,     // `run --no-report --junit FILE`: the files only
};
// Analyses a timeline and writes the report (to opt.output, else default_out as `when`
// says). Returns kFindings when a finding matches opt.fail_on, kUsage when the report
// cannot be written, else kOk.
int EmitReport(const v1::Timeline& timeline, const ReportOptions& opt, std::FILE* default_out,
               PrintWhen when);
// The same for a report already made; timeline (for --junit) may be nullptr.
int EmitAnalysed(const v1::Report& report, const v1::Timeline* timeline, const ReportOptions& opt,
                 std::FILE* default_out, PrintWhen when);

// The audit library that belongs to this ldscope binary: LDSCOPE_AUDIT_LIB, else
// next to the executable (build tree), else in the install's lib/ldscope.
Result<std::string> FindAuditLibrary();
// The directory holding ldscope's Python hook (sitecustomize.py): bin/python/ in the
// build tree, <prefix>/share/ldscope/python/ installed.
Result<std::string> FindPythonHook();

// The running ldscope binary (/proc/self/exe).
Result<std::string> SelfExe();
// $TMPDIR, else /tmp.
std::string TempRoot();
// A new trace's default name in the working directory: PREFIX-YYYYmmdd-HHMMSS-PID.ldscope.
std::string DefaultTraceName(const std::string& prefix);
// A new 0700 directory parent/prefix-XXXXXX; its path.
Result<std::string> MakePrivateDir(const std::string& parent, const std::string& prefix);

// "ldscope: " + message on stderr.
void Complain(const std::string& message);
// Why COMMAND (as execvp finds it) cannot be traced at all: statically linked, or run
// in secure-execution mode (set-user-ID, set-group-ID, file capabilities), directly or
// as a script's interpreter. "" when nothing says so.
std::string WhyNotTraced(const std::string& command);
// A trace named "-" is standard input: it is copied into a private file (a 0700
// directory under $TMPDIR, removed at exit) whose path replaces every "-" in inputs, so
// every reader reads it as it reads a file. Nothing happens without a "-".
Status ReadStandardInputAsFile(const std::vector<std::string*>& inputs);
// argv with the values of secret arguments replaced, by audit/redact.h's rule.
std::vector<std::string> RedactArgv(const std::vector<std::string>& argv);
// Writes text to out (stdout or stderr), checking the write; on failure says so on
// stderr and returns false.
[[nodiscard]] bool Print(std::FILE* out, const std::string& text);
// A damaged trace on stderr: "FILE: at byte offset N: MESSAGE (ANALYSING what precedes
// it)", or "FILE: MESSAGE" when nothing of the file could be read.
void ComplainDamage(const std::string& file, uint64_t offset, const std::string& message,
                    const char* analysing);
// Says "no trace could be read" and returns kUsage.
int NoTrace();
// The traces of paths hold more than a reader takes (store::TooLarge): says so, true.
bool RefuseTooLarge(const std::vector<std::string>& paths);

}  // namespace ldscope::cli
