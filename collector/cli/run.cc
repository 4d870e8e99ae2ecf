// `ldscope run`: start a command under the audit library with the collector embedded
// (a private socket in a 0700 directory, served by our own event loop until the
// command and everything it started are done), and exit with the command's status.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "cli/run_dir.h"
#include "cli/session.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/lock_file.h"
#include "store/output_file.h"
#include "store/trace_file.h"
#include "text/escape.h"
#include "text/strings.h"

extern char** environ;

namespace ldscope::cli {
namespace {

pid_t g_child = -1;

// SIGTERM/SIGHUP to ldscope go to the command; it decides how to end.
void Forward(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// SIGINT from a terminal (Ctrl-C: the kernel sends it to the whole foreground process
// group, the command included) is the command's business; SIGINT sent to ldscope by
// a process (`kill -INT`) is passed on, as SIGTERM and SIGHUP are.
void ForwardInt(int sig, siginfo_t* info, void*) {
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  Forward(sig);
}

// A variable `run` sets for the traced command (and a nested run inherits): its own value
// replaces ours, and an untraced command gets none.
bool SetByRun(const std::string& entry) {
  return entry.rfind("LDSCOPE_SOCKET=", 0) == 0 || entry.rfind("LDSCOPE_DIR=", 0) == 0 ||
         entry.rfind("LDSCOPE_KEEP_ARGV=", 0) == 0;
}

// The command's environment: ours plus LD_AUDIT (after any auditors the user already
// has, so ours sees what ld.so really does), the socket, and the Python hook's
// directory first on PYTHONPATH (its sitecustomize chains to the environment's own).
// with: "VAR=VALUE" changes (--with-env), applied to ours first (WithChanges).
std::vector<std::string> ChildEnv(const std::string& audit_lib, const std::string& socket,
                                  const std::string& python_hook, bool keep_argv,
                                  const std::vector<std::string>& with) {
  const std::vector<std::string> ours = WithChanges(with);
  std::vector<std::string> env;
  std::string ld_audit = audit_lib;
  std::string pythonpath = python_hook;
  for (const std::string& entry : ours) {
    if (entry.rfind("LD_AUDIT=", 0) == 0) {
      const std::string prev = OtherAuditors(entry.substr(9));
      if (!prev.empty()) ld_audit = prev + ":" + audit_lib;
      continue;
    }
    if (!python_hook.empty() && entry.rfind("PYTHONPATH=", 0) == 0) {
      std::string prev = entry.substr(11);
      if (prev == python_hook) prev.clear();  // a nested run: the hook is there already
      if (prev.rfind(python_hook + ":", 0) == 0) prev.erase(0, python_hook.size() + 1);
      if (!prev.empty()) pythonpath = python_hook + ":" + prev;
      continue;
    }
    if (!SetByRun(entry)) env.push_back(entry);
  }
  env.push_back("LD_AUDIT=" + ld_audit);
  env.push_back("LDSCOPE_SOCKET=" + socket);
  if (keep_argv) env.push_back("LDSCOPE_KEEP_ARGV=1");
  if (!pythonpath.empty()) env.push_back("PYTHONPATH=" + pythonpath);
  return env;
}

timespec Monotonic() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

double SecondsSince(const timespec& t0) {
  const timespec t = Monotonic();
  return static_cast<double>(t.tv_sec - t0.tv_sec) + static_cast<double>(t.tv_nsec - t0.tv_nsec) / 1e9;
}

int ExitStatusOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string ExitText(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exit status {}", WEXITSTATUS(status));
}

// What Run needs before it starts anything.
struct RunInputs {
  v1::Lock lock;            // --lock's, read first
  std::string audit_lib;    // the path LD_AUDIT gets
  std::string python_hook;  // the Python hook's directory; "" without the hook
  std::string output;       // the trace file (or "-")
};

// The timeline is built after the command when it is analysed, written as JUnit or
// checked against a lock.
bool NeedsTimeline(const RunOptions& opt) {
  return opt.analyse || !opt.report.junit.empty() || !opt.lock.empty();
}

// The Python hook's directory, or "" (complained) when it is missing or its path
// cannot go on PYTHONPATH: the run goes on without it.
std::string PythonHookDir() {
  const Result<std::string> hook = FindPythonHook();
  if (!hook.ok() || hook->find(':') != std::string::npos) {
    Complain((!hook.ok() ? hook.error() : "the Python hook's path contains ':': " + *hook) +
             "; Python loads will not be attributed to imports");
    return "";
  }
  return *hook;
}

// Checks the options and finds what the command needs; the exit status (complained)
// when we must stop before anything runs, else kOk.
int FindInputs(const RunOptions& opt, RunInputs* in) {
  // (--fail-on's words were checked by main's CLI11 validator.)
  // The lock is read first: a missing or garbled one stops us before anything runs.
  if (!opt.lock.empty()) {
    Result<v1::Lock> read = store::ReadLockFile(opt.lock);
    if (!read.ok()) {
      Complain(read.error());
      return kUsage;
    }
    in->lock = std::move(read).value();
  }
  Result<std::string> audit_lib = FindAuditLibrary();
  if (!audit_lib.ok()) {
    Complain(audit_lib.error());
    return kUsage;
  }
  in->audit_lib = std::move(audit_lib).value();
  if (in->audit_lib.find(':') != std::string::npos) {
    Complain("the audit library's path contains ':', which LD_AUDIT cannot express: " + in->audit_lib);
    return kUsage;
  }
  if (opt.python_hook) in->python_hook = PythonHookDir();
  in->output = opt.output.empty() ? DefaultTraceName("ldscope") : opt.output;
  // The inputs: the lock, and the command when it is named by a path.
  std::vector<std::string> inputs = {opt.lock};
  if (opt.command.front().find('/') != std::string::npos) inputs.push_back(opt.command.front());
  if (Status s = store::CheckOutputs(
          {{"-o", in->output}, {"--report", opt.report.output}, {"--junit", opt.report.junit}}, inputs);
      !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  return kOk;
}

// The socket the command's processes send to, in the run directory.
std::string SocketIn(const std::string& dir) { return dir + "/events.sock"; }

// Makes the private run directory and starts serving its socket. Returns the
// directory, or "" (complained) when either fails.
std::string OpenSession(const RunInputs& in, Session& session) {
  std::string tmpdir = TempRoot();
  // A socket's path holds at most 107 bytes (sun_path): a $TMPDIR too long for
  // TMPDIR/ldscope-XXXXXX/events.sock (a build system's sandbox) gives way to /tmp.
  if (SocketIn(tmpdir + "/ldscope-XXXXXX").size() >= sizeof(sockaddr_un::sun_path)) {
    Complain(fmt::format("$TMPDIR is too long for a socket path under it ({} bytes); the run directory is in /tmp",
                         tmpdir.size()));
    tmpdir = "/tmp";
  }
  CleanStaleRunDirs(tmpdir);
  const Result<std::string> made = MakeRunDir(tmpdir);
  if (!made.ok()) {
    Complain(made.error());
    session.Abandon();
    return "";
  }
  const std::string& dir = *made;
  if (Status s = session.Listen(SocketIn(dir)); !s.ok()) {
    Complain(s.error());
    RemoveRunDir(dir);
    return "";
  }
  session.server().set_python_hook_dir(in.python_hook);
  return dir;
}

// The signal dispositions Run changes while the command runs, to put back.
struct SavedSignals {
  struct sigaction int_ {}, quit {}, term {}, hup {}, pipe {};
};

// While the command runs, terminal signals are its business; we wait like a shell.
void IgnoreTerminalSignals(SavedSignals* old) {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old->int_);
  sigaction(SIGQUIT, &ign, &old->quit);
  // A trace written to a pipe whose reader is gone is a write error to report, not a
  // reason to die before the command does.
  sigaction(SIGPIPE, &ign, &old->pipe);
}

// SIGTERM, SIGHUP and a SIGINT sent by a process go on to the command.
void ForwardSignals(SavedSignals* old) {
  struct sigaction fwd {}, fwd_int {};
  fwd.sa_handler = Forward;
  fwd_int.sa_sigaction = ForwardInt;
  fwd_int.sa_flags = SA_SIGINFO;
  sigaction(SIGTERM, &fwd, &old->term);
  sigaction(SIGHUP, &fwd, &old->hup);
  sigaction(SIGINT, &fwd_int, nullptr);
}

// Forks and execs the command with env; the signals ldscope ignores are the
// command's again. stdout_to_stderr: the trace goes to our standard output, so the
// command's goes to standard error (one stream cannot carry both). Returns the child's pid with *exec_errno the errno
// of a failed exec (0 when the command runs), or -1 (complained) when there is no child.
pid_t Launch(const std::vector<std::string>& command, std::vector<std::string> env, bool stdout_to_stderr,
             SavedSignals* old, int* exec_errno) {
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // A pipe closed on exec tells us whether exec worked (and errno if not).
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    Complain(fmt::format("pipe: {}", std::strerror(errno)));
    return -1;
  }
  const pid_t child = fork();
  if (child < 0) {
    Complain(fmt::format("fork: {}", std::strerror(errno)));
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    return -1;
  }
  if (child == 0) {
    sigaction(SIGINT, &old->int_, nullptr);
    sigaction(SIGQUIT, &old->quit, nullptr);
    sigaction(SIGPIPE, &old->pipe, nullptr);
    close(exec_pipe[0]);
    if (stdout_to_stderr) dup2(2, 1);
    execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!write(exec_pipe[1], &e, sizeof e);
    _exit(e == ENOENT ? 127 : 126);
  }
  g_child = child;
  ForwardSignals(old);
  close(exec_pipe[1]);
  ssize_t got;
  do {
    got = read(exec_pipe[0], exec_errno, sizeof *exec_errno);
  } while (got < 0 && errno == EINTR);
  if (got != sizeof *exec_errno) *exec_errno = 0;
  close(exec_pipe[0]);
  return child;
}

// Serves the command's events until it exits and returns its wait status. A pidfd
// wakes us at once (the 1 s wake-up is only a safety net); without one (kernels before
// 5.3), look with waitpid every 20 ms, which is how late the exit may be noticed.
int ServeUntilExit(Session& session, pid_t child) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  if (pidfd >= 0) session.server().WatchExtra(pidfd);
  int status = 0;
  for (;;) {
    session.server().Poll(pidfd >= 0 ? 1000 : 20);
    const pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR) break;
  }
  if (pidfd >= 0) {
    session.server().WatchExtra(-1);
    close(pidfd);
  }
  g_child = -1;
  return status;
}

// After the command: the stragglers' events, the facts, the trace closed, the run
// directory removed and the terminal signals ours again; then the closing line.
// Returns Finish's result (an error when the trace is incomplete).
Status CloseSession(const RunOptions& opt, const RunInputs& in, Session& session, const std::string& dir,
                    const SavedSignals& old, pid_t child, int status) {
  session.SetCommandExit(child, status);
  // Children that outlive the command keep their connections: wait for them a little.
  session.Drain(kRunDrainPollMs, kRunDrainCapMs);
  if (opt.facts) session.WriteFacts(kFactsLimitMs);
  std::string summary = session.Summary();
  const bool seen = session.server().SawPid(static_cast<uint32_t>(child));
  if (!seen) {
    const std::string why = WhyNotTraced(opt.command.front());
    summary += "; the command itself was not traced: " + (why.empty() ? std::string("no event came from it") : why);
  }
  Status finished = session.Finish();
  RemoveRunDir(dir);
  sigaction(SIGINT, &old.int_, nullptr);
  sigaction(SIGQUIT, &old.quit, nullptr);
  sigaction(SIGTERM, &old.term, nullptr);
  sigaction(SIGHUP, &old.hup, nullptr);

  if (!finished.ok()) Complain(finished.error());
  if (!opt.quiet || !finished.ok() || !seen)
    Complain(fmt::format("{}: {}; trace {} ({})", text::Escape(opt.command.front()),
                         ExitText(status), in.output == "-" ? "on standard output" : text::Escape(in.output),
                         summary));
  return finished;
}

// The diagnosis and the lock check of what was recorded, from memory: the output may
// be a pipe or a device, or incomplete after a write error, and is never read back.
// Sets *rc (the report's status) and *lock_rc (the check's).
void Diagnose(const RunOptions& opt, const RunInputs& in, Session& session, int status, double seconds, int* rc,
              int* lock_rc) {
  const store::TraceSet traces = store::LoadTraceImage(in.output, session.trace_copy());
  const v1::Timeline timeline = model::BuildTimeline(traces);
  const elf::TraceFacts facts = analysis::FactsOf(traces);
  if (opt.analyse || !opt.report.junit.empty()) {
    ReportOptions ropt = opt.report;
    ropt.trace_of_stream = store::TraceFilesByStream(traces);
    ropt.facts = &facts;
    ropt.files = session.read_files();
    std::vector<std::string> words;
    if (!ropt.title.empty()) words.push_back(ropt.title);
    for (const auto& a : opt.keep_argv ? opt.command : RedactArgv(opt.command)) words.push_back(text::Escape(a));
    ropt.title = fmt::format("{}", fmt::join(words, " "));
    v1::Report report = analysis::Analyze(timeline, ropt.facts, ropt.files, {});
    if (opt.try_fixes) TryFixes(opt, status, seconds, &report);
    *rc = EmitAnalysed(report, &timeline, ropt, stderr,
                       !opt.analyse ? PrintWhen::kNever
                       : opt.quiet  ? PrintWhen::kProblems
                                    : PrintWhen::kFindings);
  }
  // The differences go where ldscope's messages go (stderr: the command's stdout
  // stays its own), annotations included.
  if (!opt.lock.empty())
    *lock_rc = CheckAgainstLock(timeline, in.lock, text::Escape(opt.lock), opt.ignore_build_id,
                                opt.report.github, stderr);
}

}  // namespace

// LD_AUDIT's entries other than an ldscope audit library (ours, or another copy of it:
// a nested `ldscope run`, or a user's own LD_AUDIT): each copy would be loaded into a
// namespace of its own and trace every process once more.
std::string OtherAuditors(const std::string& ld_audit) {
  std::vector<std::string> others;
  size_t start = 0;
  while (start <= ld_audit.size()) {
    size_t end = ld_audit.find(':', start);
    if (end == std::string::npos) end = ld_audit.size();
    const std::string entry = ld_audit.substr(start, end - start);
    if (!entry.empty() && text::BaseName(entry) != "libldscope_audit.so") others.push_back(entry);
    start = end + 1;
  }
  return fmt::format("{}", fmt::join(others, ":"));
}

std::vector<std::string> WithChanges(const std::vector<std::string>& with) {
  std::vector<std::string> ours;
  for (char** e = environ; *e != nullptr; ++e) ours.emplace_back(*e);
  for (const std::string& change : with) {
    const std::string name = change.substr(0, change.find('=') + 1);  // "VAR="
    ours.erase(std::remove_if(ours.begin(), ours.end(), [&](const std::string& e) { return e.rfind(name, 0) == 0; }),
               ours.end());
    if (change.size() > name.size()) ours.push_back(change);
  }
  return ours;
}

std::vector<std::string> UntracedEnv(const std::vector<std::string>& with) {
  std::vector<std::string> env;
  for (const std::string& entry : WithChanges(with)) {
    if (entry.rfind("LD_AUDIT=", 0) == 0) {
      if (const std::string others = OtherAuditors(entry.substr(9)); !others.empty())
        env.push_back("LD_AUDIT=" + others);
    } else if (!SetByRun(entry)) {
      env.push_back(entry);
    }
  }
  return env;
}

int Run(const RunOptions& opt) {
  RunInputs in;
  if (const int rc = FindInputs(opt, &in); rc != kOk) return rc;
  // Left to the process's exit on the normal path (released below): freeing what the
  // report read one object at a time (the files it mapped, the trace kept in memory) took
  // about 6 ms after import torch, which the exit does at once.
  auto owned = std::make_unique<Session>();
  Session& session = *owned;
  // The output is opened first (a bad -o stops us before anything runs); an existing
  // file keeps what it had until the trace is complete.
  if (Status s = session.Prepare(in.output, NeedsTimeline(opt)); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  const std::string dir = OpenSession(in, session);
  if (dir.empty()) return kUsage;

  // The report made right after reads the files the collector read.
  if (opt.facts) session.ReadFactsEarly(/*keep_files=*/opt.analyse || !opt.report.junit.empty());
  SavedSignals old;
  IgnoreTerminalSignals(&old);
  int exec_errno = 0;
  const timespec started = Monotonic();
  const pid_t child =
      Launch(opt.command, ChildEnv(in.audit_lib, SocketIn(dir), in.python_hook, opt.keep_argv, opt.with_env),
             session.writes_stdout(), &old, &exec_errno);
  if (child < 0) {
    // Nothing ran (no pipe, no fork): no trace, no run directory, our signals as they were.
    session.Abandon();
    RemoveRunDir(dir);
    sigaction(SIGINT, &old.int_, nullptr);
    sigaction(SIGQUIT, &old.quit, nullptr);
    sigaction(SIGPIPE, &old.pipe, nullptr);
    return kUsage;
  }
  if (exec_errno != 0) {
    // Nothing ran: no trace, and an existing file of that name stays as it was.
    Complain(fmt::format("cannot run {}: {}; no trace written", text::Escape(opt.command.front()),
                         std::strerror(exec_errno)));
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    session.Abandon();
    RemoveRunDir(dir);
    return ExitStatusOf(st);
  }
  if (const Status begun = session.Begin(); !begun.ok())
    Complain(begun.error() + " (the command runs, unrecorded on disk)");

  const int status = ServeUntilExit(session, child);
  const double seconds = SecondsSince(started);
  const Status finished = CloseSession(opt, in, session, dir, old, child, status);
  int rc = kOk, lock_rc = kOk;
  if (NeedsTimeline(opt)) Diagnose(opt, in, session, status, seconds, &rc, &lock_rc);
  sigaction(SIGPIPE, &old.pipe, nullptr);
  (void)owned.release();  // the trace is closed and the thread joined: Run's caller exits
  // A lock mismatch ranks as --fail-on does: over the command's own status, under a
  // write failure.
  if (!finished.ok() || rc == kWriteFailed || lock_rc == kWriteFailed) return kWriteFailed;
  if (rc != kOk) return rc;
  if (lock_rc != kOk) return lock_rc;
  return ExitStatusOf(status);
}

}  // namespace ldscope::cli
