// ldscope: watch the dynamic loader in a live process and explain what it did.
// main() is the list of sub-commands; each lives in its own file.
#include <algorithm>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/help.h"

namespace ldscope::cli {
namespace {

// --fail-on's words, checked one by one as CLI11 splits them at the commas (a bad word
// is "--fail-on: unknown kind 'x' (one of: ...)" and status 2, like any bad argument).
const CLI::Validator kFailOnKinds([](std::string& word) { return CheckFailOn(word).error(); }, "");
const CLI::Validator kDiffConditions(
    [](std::string& word) -> std::string {
      if (word == "new-findings" || word == "changes") return "";
      return "unknown condition '" + word + "' (new-findings or changes)";
    },
    "");

// run: trace a command (and every process it starts) with the embedded collector.
CLI::App* AddRun(CLI::App& app, RunOptions& run) {
  auto* run_cmd = app.add_subcommand("run",
                                     "Run COMMAND under the audit library and record a trace. Exits with the "
                                     "command's status (128+N when killed by signal N), 3 when --fail-on matched or "
                                     "the trace differs from --lock (over the command's status), 4 when an output "
                                     "(trace, report, JUnit, step summary) could not be written completely or was "
                                     "refused.");
  run_cmd->add_option("-o,--output", run.output,
                      "Trace file to write (default: ldscope-<date>-<pid>.ldscope; - for "
                      "standard output: the command's own standard output then goes to standard error). "
                      "Written 0600 next to the file and renamed over it when the run ends");
  run_cmd->add_flag("-q,--quiet", run.quiet,
                    "Print nothing of ldscope's own unless there are findings or errors");
  run_cmd->add_flag("!--no-report", run.analyse, "Do not analyse the trace after the command");
  run_cmd->add_flag("!--no-python-hook", run.python_hook,
                    "Do not put ldscope's Python hook on PYTHONPATH (without it, loads in "
                    "Python are not attributed to imports and source lines)");
  run_cmd->add_flag("!--no-facts", run.facts,
                    "Do not add the loaded files' ELF facts (names, versions, symbols) to the trace at the "
                    "end; without them a report made where the files are gone or changed misses "
                    "the findings that need them");
  run_cmd->add_option("--report", run.report.output,
                      "Write the diagnosis to this file instead of stderr");
  run_cmd->add_option("--format", run.report.format, "Diagnosis format: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  run_cmd
      ->add_option("--color", run.report.color,
                   "Colour the text diagnosis: auto (on a terminal, unless NO_COLOR is set), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  run_cmd->add_option("--fail-on", run.report.fail_on,
                      "Exit with status 3 when findings of these kinds exist (comma-separated: " +
                          FailOnHelp() + ")")
      ->delimiter(',')->check(kFailOnKinds)->allow_extra_args(false);
  run_cmd->add_option("--junit", run.report.junit,
                      "Also write the diagnosis as JUnit XML (a test suite per program, a test "
                      "case per process; error findings and those --fail-on names fail) to this "
                      "file, even with --no-report");
  run_cmd->add_flag("--github", run.report.github,
                    "GitHub Actions annotations (on stderr) and step summary (also when "
                    "GITHUB_ACTIONS=true)");
  run_cmd->add_option("--lock", run.lock,
                      "After the command, check what it loaded against this lock file (see "
                      "`ldscope check`): the differences on stderr, status 3 when there are any "
                      "(as for --fail-on); a missing or garbled lock stops ldscope before the "
                      "command runs (status 2)");
  run_cmd->add_flag("--keep-argv", run.keep_argv,
                    "Record the values of arguments named like secrets (--password=..., "
                    "--token ..., API_KEY=...), which are otherwise replaced by <redacted> "
                    "(LDSCOPE_KEEP_ARGV=1 in the command's environment)");
  run_cmd
      ->add_flag("--try-fixes", run.try_fixes,
                 "After a run with error findings, run the command again once per environment or "
                 "import-order fix (traced, with the variable set or the script's lines moved in a copy; "
                 "input from /dev/null, output into a kept directory under $TMPDIR that ldscope names) and "
                 "mark each fix verified when the finding is gone and the command exits 0 or as before. "
                 "A run may take twice as long as the command did (at least 10 s)")
      ->excludes("--no-report");
  // A trial's environment change, for the command only (the trial's `ldscope run` keeps
  // the environment the first run had): not for people, so not in the help.
  run_cmd->add_option("--with-env", run.with_env, "")
      ->group("")
      ->allow_extra_args(false)
      ->check([](const std::string& v) {
        return v.empty() || v.front() == '=' || v.find('=') == std::string::npos ? std::string("VAR=VALUE expected")
                                                                                 : std::string();
      });
  run_cmd->add_flag("--ignore-build-id", run.ignore_build_id,
                    "With --lock: do not compare build-ids");
  // Everything from the first non-option argument on is the command's.
  run_cmd->prefix_command();
  run_cmd->allow_extras();
  run_cmd->footer("Usage: ldscope run [-o FILE] [-q] [--lock FILE] [--] COMMAND [ARGS...]");

  return run_cmd;
}

// collect: the same server, standalone, for programs started elsewhere.
CLI::App* AddCollect(CLI::App& app, CollectOptions& collect) {
  auto* collect_cmd = app.add_subcommand(
      "collect", "Serve a socket and record what traced programs send, until SIGINT, "
                 "SIGTERM or SIGHUP. Start programs with LD_AUDIT=<audit library> "
                 "LDSCOPE_SOCKET=<socket> (and, to attribute Python's loads to imports, "
                 "PYTHONPATH=<ldscope's python directory>; both paths are printed at start).");
  collect_cmd->add_option("--socket", collect.socket, "Socket path to create")->required();
  collect_cmd->add_option("-o,--output", collect.output,
                          "Trace file to write (- for standard output; created 0600)")
      ->required();
  collect_cmd->add_flag("-q,--quiet", collect.quiet, "No start/stop messages");
  collect_cmd->add_flag("!--no-facts", collect.facts,
                        "Do not add the loaded files' ELF facts (names, versions, symbols) to the trace at the "
                    "end; without them a report made where the files are gone or changed misses "
                    "the findings that need them");
  collect_cmd->add_option("--otlp", collect.otlp,
                          "Also stream OpenTelemetry (OTLP/HTTP protobuf) to this endpoint while "
                          "recording (http[s]://HOST[:PORT][/PATH], e.g. an OpenTelemetry Collector's "
                          "http://127.0.0.1:4318; requests go to PATH/v1/traces and PATH/v1/logs): "
                          "each process image's spans and findings once it exits. Sent from "
                          "background threads with a bounded queue and bounded retries: a slow or "
                          "dead endpoint never holds up tracing; what could not be sent is counted "
                          "as dropped in the closing summary");

  return collect_cmd;
}

// snapshot: what running processes have loaded, read without stopping them.
CLI::App* AddSnapshot(CLI::App& app, SnapshotOptions& snap) {
  auto* cmd =
      app.add_subcommand("snapshot",
                         "Read what running processes have loaded (their link maps in every namespace, read from "
                         "their memory without stopping them: no ptrace attach, no signal, no write), write it as a "
                         "trace that report, show, lock, check, diff and export read, and print the diagnosis of what "
                         "a snapshot can know (which search step found an object and what failed before it are not "
                         "known). Exit status 2 when a process cannot be read (the message says which rule refused "
                         "and how to allow it; no trace is written), 3 when --fail-on matches, 4 when the trace or "
                         "report cannot be written.");
  cmd->add_option("pid", snap.pids, "Processes to read");
  cmd->add_option("--tree", snap.tree, "A process and all its descendants (every rank of a torchrun)");
  cmd->add_flag("--all-python", snap.all_python, "Every Python process of this user");
  cmd->add_option("-o,--output", snap.output,
                  "Trace file to write (default: ldscope-snapshot-<date>-<pid>.ldscope; - for standard output, "
                  "the report then goes to standard error)");
  cmd->add_flag("-q,--quiet", snap.quiet, "No closing line");
  cmd->add_flag("!--no-report", snap.analyse, "Do not print the diagnosis");
  cmd->add_flag("!--no-facts", snap.facts,
                "Do not add the loaded files' ELF facts (names, versions, symbols) to the trace");
  cmd->add_option("--report", snap.report.output, "Write the diagnosis to this file instead of stdout");
  cmd->add_option("--format", snap.report.format, "Diagnosis format: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--fail-on", snap.report.fail_on,
                  "Exit with status 3 when findings of these kinds exist (as for run)")
      ->delimiter(',')
      ->check(kFailOnKinds)
      ->allow_extra_args(false);
  cmd->add_option("--junit", snap.report.junit, "Also write the diagnosis as JUnit XML to this file");
  return cmd;
}

// show: print a trace's per-process timeline.
CLI::App* AddShow(CLI::App& app, ShowOptions& show) {
  auto* show_cmd = app.add_subcommand(
      "show", "Print the per-process timeline of traces (files, or LDSCOPE_DIR "
              "directories). Exit status 1 when a trace is damaged (what precedes the "
              "damage is still shown).");
  show_cmd->add_option("trace", show.traces, "Trace files or directories (- for standard input)")->required();
  show_cmd->add_option("--format", show.format, "text or json (proto3 JSON mapping)")
      ->check(CLI::IsMember({"text", "json"}));
  show_cmd->add_flag("--timestamps,!--no-timestamps", show.timestamps,
                     "Show time offsets (default on)");
  show_cmd->add_flag("-v,--verbose", show.verbose,
                     "Also list unloads at exit and reuses within one batch of loads");

  return show_cmd;
}

// report: the diagnosis of saved traces.
CLI::App* AddReport(CLI::App& app, ReportCommandOptions& report) {
  auto* report_cmd = app.add_subcommand(
      "report", "Analyse traces (files or LDSCOPE_DIR directories): missing libraries and "
                "symbols, duplicate libraries and runtimes, shadowed dependencies (import-order "
                "effects), fall-through to other installations, symbol interposition. Traces of "
                "several hosts (TraceHeader.host: the host name, or LDSCOPE_HOST when the trace "
                "was taken) are analysed one host at a time, then compared: the hosts and ranks "
                "running one program that loaded another file for a library (host-mismatch). "
                "Exit status 3 when --fail-on matches, 1 when a trace is damaged or an input "
                "could not be read.");
  report_cmd->add_option("trace", report.traces,
                         "Trace files or directories (LDSCOPE_DIR, or one per host: host-a/ host-b/ ...; - for standard input)")
      ->required();
  report_cmd->add_option("--format", report.report.format, "text or json (proto3 JSON mapping)")
      ->check(CLI::IsMember({"text", "json"}));
  report_cmd->add_option("-o,--output", report.report.output, "Write the report to this file");
  report_cmd
      ->add_option("--color", report.report.color,
                   "Colour the text diagnosis: auto (on a terminal, unless NO_COLOR is set), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  report_cmd->add_option("--fail-on", report.report.fail_on,
                         "Exit with status 3 when findings of these kinds exist (as for run)")
      ->delimiter(',')->check(kFailOnKinds)->allow_extra_args(false);
  report_cmd->add_flag("--across-hosts-only", report.report.across_hosts_only,
                       "With traces of several hosts: only compare the hosts (host-mismatch), "
                       "without each host's own diagnosis (which reads every library's symbols: "
                       "for a thousand hosts, most of the time)");
  report_cmd->add_option("--junit", report.report.junit,
                         "Also write the diagnosis as JUnit XML (a test suite per program, a "
                         "test case per process; error findings and those --fail-on names fail) to "
                         "this file");
  report_cmd->add_flag("--github", report.report.github,
                       "GitHub Actions annotations (on stdout) and step summary (also when "
                       "GITHUB_ACTIONS=true)");
  report_cmd->add_flag("--perf", report.perf,
                       "After the report, a table of where the time went on standard error: each "
                       "phase (read, facts, model, files, every analysis pass, notes, render), its "
                       "wall-clock and CPU milliseconds and how often it ran");

  return report_cmd;
}

// diff: regression traces.
CLI::App* AddDiff(CLI::App& app, DiffOptions& diff) {
  auto* diff_cmd = app.add_subcommand(
      "diff", "Compare two traces of the same workload (files or LDSCOPE_DIR directories; "
              "processes matched by command line): libraries added, removed, moved, found by "
              "another step, another version or first loader; findings new and resolved.");
  diff_cmd->add_option("base", diff.base, "The baseline trace (- for standard input)")->required();
  diff_cmd->add_option("new", diff.now, "The new trace")->required();
  diff_cmd->add_option("--format", diff.format, "text or json (proto3 JSON mapping)")
      ->check(CLI::IsMember({"text", "json"}));
  diff_cmd->add_option("--fail-on", diff.fail_on,
                       "Exit with status 3 on: new-findings, changes (comma-separated)")
      ->delimiter(',')->check(kDiffConditions)->allow_extra_args(false);

  return diff_cmd;
}

// lock: a baseline of what a workload loaded, for code review.
CLI::App* AddLock(CLI::App& app, LockOptions& lock) {
  auto* lock_cmd = app.add_subcommand(
      "lock", "Write a lock file: per program (its executable; arguments do not matter), each "
              "library it loaded: SONAME, file relative to a root (site-packages, conda = "
              "$CONDA_PREFIX, venv = $VIRTUAL_ENV, cuda, system, or / for an absolute path), "
              "version and build-id ('unknown' when not read); ld.so, the vDSO and ldscope's "
              "own objects left out, a program's processes merged. Sorted, one library a "
              "line, the same for every trace of the same workload on one machine (pids, "
              "times and hwcaps subdirectories left out): commit it next to the code. "
              "Exit status 1 when a trace is damaged (what precedes the damage is locked).");
  lock_cmd->add_option("trace", lock.traces, "Trace files or directories (- for standard input)")->required();
  lock_cmd->add_option("-o,--output", lock.output,
                       "Write the lock to this file (default: standard output)");

  return lock_cmd;
}

// check: a trace against a lock.
CLI::App* AddCheck(CLI::App& app, CheckOptions& check) {
  auto* check_cmd = app.add_subcommand(
      "check", "Compare traces with a lock file (ldscope lock), per program and library: "
               "libraries added or removed, another file or root, another version, another "
               "build-id; programs added or missing. Every difference fails (status 3, the "
               "differences on stdout); a version or build-id 'unknown' on either side "
               "matches anything. No output and status 0 when the traces match. Status 2 for a "
               "missing or garbled lock file (with the line), 1 when a trace is damaged.");
  check_cmd->add_option("--lock", check.lock, "The lock file")->required();
  check_cmd->add_option("trace", check.traces, "Trace files or directories (- for standard input)")->required();
  check_cmd->add_flag("--ignore-build-id", check.ignore_build_id,
                      "Do not compare build-ids (locks shared between machines whose builds of "
                      "the same versions differ)");
  check_cmd->add_flag("--github", check.github,
                      "Also print each difference as a GitHub Actions ::error annotation (also "
                      "when GITHUB_ACTIONS=true)");

  return check_cmd;
}

// export: a picture of the timeline, or OpenTelemetry for a fleet's backend.
CLI::App* AddExport(CLI::App& app, ExportOptions& exp) {
  auto* export_cmd = app.add_subcommand(
      "export", "Write a trace's timeline in the Chrome trace-event format (--chrome: Perfetto "
                "UI, chrome://tracing; a track per process and thread, a span per dlopen with "
                "its loads, markers for failed dlopens and findings), or as OpenTelemetry "
                "(--otlp): a span per process image (parented on the one that forked or exec'd "
                "it), a child span per dlopen and per Python import with its loads as span "
                "events, findings as log records. Exit status 4 when the file cannot be written or "
                "the endpoint cannot be reached or answers other than 2xx, 1 when a trace is "
                "damaged (what precedes the damage is exported).");
  export_cmd->add_flag("--chrome", exp.chrome, "Chrome trace-event JSON, written to -o FILE");
  export_cmd->add_option(
      "--otlp", exp.otlp,
      "OTLP: http[s]://HOST[:PORT][/PATH] POSTs protobuf to an OTLP/HTTP "
      "endpoint such as an OpenTelemetry Collector (PATH/v1/traces and "
      "PATH/v1/logs; the other OTEL_EXPORTER_OTLP_* variables apply: headers, "
      "timeout, compression, certificate); anything else is a DIR that gets traces.jsonl and logs.jsonl, OTLP/JSON "
      "Lines files as OpenTelemetry's file exporter writes them (the "
      "Collector's otlpjsonfile receiver reads them)");
  export_cmd->add_flag("--otlp-http", exp.otlp_http,
                       "OTLP/HTTP to the endpoint OpenTelemetry's variables name "
                       "(OTEL_EXPORTER_OTLP_ENDPOINT, ..._TRACES_ENDPOINT, ..._LOGS_ENDPOINT; "
                       "default http://localhost:4318)");
  export_cmd->add_option("--otlp-traces", exp.otlp_traces,
                         "The spans as an OTLP/JSON Lines file of this name (- for standard output)");
  export_cmd->add_option("--otlp-logs", exp.otlp_logs,
                         "The findings' log records as an OTLP/JSON Lines file of this name");
  export_cmd->add_option("trace", exp.traces, "Trace files or directories (- for standard input)")->required();
  export_cmd->add_option("-o,--output", exp.output, "The JSON file to write (--chrome)");

  return export_cmd;
}

// imports: which import orders are safe.
CLI::App* AddImports(CLI::App& app, ImportsOptions& imports) {
  auto* imports_cmd = app.add_subcommand(
      "imports", "Import MODULEs in every order (all permutations up to 4 modules, else every "
                 "pair both ways), each in a fresh traced interpreter; print the outcome, "
                 "duplicate libraries and shadowed dependencies of each order, and a "
                 "conclusion per problem.");
  imports_cmd->add_option("module", imports.modules, "Python modules")->required();
  imports_cmd->add_option("--python", imports.python,
                          "The interpreter (default: the python3 first on PATH, as a shell finds it)");
  imports_cmd->add_option("--format", imports.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  imports.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  imports_cmd->add_option("-j,--jobs", imports.jobs, "Orders run at once (default: the number of CPUs)")
      ->check(CLI::PositiveNumber);
  imports_cmd
      ->add_option("--fail-on", imports.fail_on,
                   "Exit with status 3 when an order has findings of these kinds, or (error, "
                   "warning, any) when an order fails (comma-separated: " +
                       FailOnHelp() + ")")
      ->delimiter(',')
      ->check(kFailOnKinds)
      ->allow_extra_args(false);

  return imports_cmd;
}

// CLI11 2.1 mishandles "--" inside a subcommand: split the command off ourselves.
// argc is cut at the first "--"; the arguments after it are run's command.
struct Dashes {
  bool had = false;
  std::vector<std::string> after;
};
Dashes SplitAtDashes(int& argc, char** argv) {
  Dashes dashes;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      dashes.had = true;
      for (int j = i + 1; j < argc; ++j) dashes.after.emplace_back(argv[j]);
      argc = i;
      break;
    }
  }
  return dashes;
}

// hook: the .pth hook that explains a loader error when it ends a Python program.
CLI::App* AddHook(CLI::App& app, HookOptions& hook) {
  auto* cmd = app.add_subcommand(
      "hook",
      "Install or remove a hook in a Python environment (one .pth file in its site-packages): when an "
      "ImportError or OSError with a loader message (undefined symbol, cannot open shared object file, ...) ends "
      "a Python program, it prints what `ldscope snapshot` finds in the process under the traceback. It "
      "changes neither the traceback nor the exit status, and prints nothing otherwise.");
  cmd->require_subcommand(1);
  for (const char* action : {"install", "uninstall"}) {
    auto* sub = cmd->add_subcommand(action, std::string(action) == "install"
                                                ? "Write the hook into the environment's site-packages (replacing "
                                                  "an earlier one of ldscope's)"
                                                : "Remove exactly the file install wrote");
    sub->callback([&hook, action] { hook.action = action; });
    sub->add_option("--python", hook.python,
                    "The Python whose site-packages (sysconfig's purelib: a venv's or conda env's own) gets the "
                    "hook (default: python3 on PATH, the active environment's)");
    sub->add_option("--target", hook.target, "A site-packages directory, instead of asking --python");
    sub->add_flag("--user", hook.user, "--python's user site-packages instead (it must exist)");
    sub->add_flag("-q,--quiet", hook.quiet, "Say nothing when it worked");
  }
  return cmd;
}

// run, once parsed: the command starts at the first non-option argument, or after a
// "--" that comes before any. A "--" after the command's first word is the command's
// (`ldscope run -o t /bin/echo a -- b` runs `/bin/echo a -- b`).
int StartRun(RunOptions& run, CLI::App& run_cmd, const Dashes& dashes) {
  // prefix_command leaves the command in the remaining args.
  run.command = run_cmd.remaining();
  if (dashes.had) {
    if (!run.command.empty()) run.command.emplace_back("--");
    run.command.insert(run.command.end(), dashes.after.begin(), dashes.after.end());
  }
  if (run.command.empty()) {
    Complain("run: no command given (usage: ldscope run [-o FILE] -- COMMAND [ARGS...])");
    return kUsage;
  }
  return Run(run);
}

}  // namespace
}  // namespace ldscope::cli

int main(int argc, char** argv) {
  using namespace ldscope::cli;
  CLI::App app{"ldscope: record every library search and load of a command tree, "
               "and explain what the dynamic loader did."};
  app.set_version_flag("--version", "ldscope " LDSCOPE_VERSION);
  app.require_subcommand(1);
  app.footer("Exit statuses: run exits with the command's status (128+N if killed by signal N; "
             "127/126 if it could not be found/executed, no trace written). Otherwise, and "
             "over it: 2 bad arguments, cannot start, or no trace could be read; 1 a trace is "
             "damaged; 3 --fail-on matched, or the traces differ from the lock (check, run --lock); 4 a trace, report or output could not be written "
             "completely (disk full, size limit, I/O error).");
  RunOptions run;
  auto* run_cmd = AddRun(app, run);
  CollectOptions collect;
  auto* collect_cmd = AddCollect(app, collect);
  ShowOptions show;
  auto* show_cmd = AddShow(app, show);
  SnapshotOptions snap;
  auto* snapshot_cmd = AddSnapshot(app, snap);
  HookOptions hook;
  auto* hook_cmd = AddHook(app, hook);
  ReportCommandOptions report;
  auto* report_cmd = AddReport(app, report);
  DiffOptions diff;
  auto* diff_cmd = AddDiff(app, diff);
  LockOptions lock;
  auto* lock_cmd = AddLock(app, lock);
  CheckOptions check;
  auto* check_cmd = AddCheck(app, check);
  ExportOptions exp;
  auto* export_cmd = AddExport(app, exp);
  ImportsOptions imports;
  auto* imports_cmd = AddImports(app, imports);
  std::string help_topic;
  auto* help_cmd = AddHelp(app, help_topic);
  GenerateOptions generate;
  auto* generate_cmd = AddGenerate(app, generate);
  UseWrappingHelp(app);
  const Dashes dashes = SplitAtDashes(argc, argv);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kOk : kUsage;
  }
  if (*help_cmd) return PrintHelpCommand(app, help_topic);
  if (*generate_cmd) return Generate(app, generate);
  if (*run_cmd) return StartRun(run, *run_cmd, dashes);
  if (dashes.had) {
    Complain("'--' is only meaningful with run");
    return kUsage;
  }
  if (*collect_cmd) return Collect(collect);
  if (*snapshot_cmd) return Snapshot(snap);
  if (*hook_cmd) return Hook(hook);
  // Every reader takes "-" for standard input.
  std::vector<std::string*> inputs;
  for (auto* traces : {&show.traces, &report.traces, &lock.traces, &check.traces, &exp.traces})
    for (auto& t : *traces) inputs.push_back(&t);
  inputs.push_back(&diff.base);
  inputs.push_back(&diff.now);
  if (ldscope::Status s = ReadStandardInputAsFile(inputs); !s.ok()) {
    Complain(s.error());
    return kUsage;
  }
  if (*report_cmd) return Report(report);
  if (*diff_cmd) return Diff(diff);
  if (*lock_cmd) return Lock(lock);
  if (*check_cmd) return Check(check);
  if (*export_cmd) return Export(exp);
  if (*imports_cmd) return Imports(imports);
  if (*show_cmd) return Show(show);
  return kUsage;
}
