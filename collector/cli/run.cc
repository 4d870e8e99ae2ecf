// `ldscope run`: start a command under the audit library with the collector embedded
// (a private socket in a 0700 directory, served by our own event loop until the
// command and everything it started are done), and exit with the command's status.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/session.h"
#include "model/timeline.h"
#include "store/trace_file.h"
#include "text/escape.h"

extern char** environ;

namespace ldscope::cli {
namespace {

pid_t g_child = -1;

// SIGTERM/SIGHUP to ldscope go to the command; it decides how to end.
void Forward(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

std::string DefaultOutput() {
  const time_t now = time(nullptr);
  tm t{};
  localtime_r(&now, &t);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &t);
  return fmt::format("ldscope-{}-{}.ldscope", stamp, getpid());
}

// The command's environment: ours plus LD_AUDIT (after any auditors the user already
// has, so ours sees what ld.so really does), the socket, and the Python hook's
// directory first on PYTHONPATH (its sitecustomize chains to the environment's own).
std::vector<std::string> ChildEnv(const std::string& audit_lib, const std::string& socket,
                                  const std::string& python_hook) {
  std::vector<std::string> env;
  std::string ld_audit = audit_lib;
  std::string pythonpath = python_hook;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("LD_AUDIT=", 0) == 0) {
      const std::string prev = entry.substr(9);
      if (!prev.empty()) ld_audit = prev + ":" + audit_lib;
      continue;
    }
    if (!python_hook.empty() && entry.rfind("PYTHONPATH=", 0) == 0) {
      const std::string prev = entry.substr(11);
      if (!prev.empty()) pythonpath = python_hook + ":" + prev;
      continue;
    }
    if (entry.rfind("LDSCOPE_SOCKET=", 0) == 0 || entry.rfind("LDSCOPE_DIR=", 0) == 0) continue;
    env.push_back(entry);
  }
  env.push_back("LD_AUDIT=" + ld_audit);
  env.push_back("LDSCOPE_SOCKET=" + socket);
  if (!pythonpath.empty()) env.push_back("PYTHONPATH=" + pythonpath);
  return env;
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

}  // namespace

int Run(const RunOptions& opt) {
  if (std::string e = CheckFailOn(opt.report.fail_on); !e.empty()) {
    Complain(e);
    return kUsage;
  }
  std::string err;
  const std::string audit_lib = FindAuditLibrary(&err);
  if (audit_lib.empty()) {
    Complain(err);
    return kUsage;
  }
  if (audit_lib.find(':') != std::string::npos) {
    Complain("the audit library's path contains ':', which LD_AUDIT cannot express: " + audit_lib);
    return kUsage;
  }
  std::string python_hook;
  if (opt.python_hook) {
    python_hook = FindPythonHook(&err);
    if (python_hook.empty() || python_hook.find(':') != std::string::npos) {
      Complain((python_hook.empty() ? err : "the Python hook's path contains ':': " + python_hook) +
               "; Python loads will not be attributed to imports");
      python_hook.clear();
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = fmt::format("{}/ldscope-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir_template.data()) == nullptr) {  // mkdtemp makes it 0700
    Complain(fmt::format("cannot create a private directory {}: {}", dir_template,
                         std::strerror(errno)));
    return kUsage;
  }
  const std::string dir = dir_template;
  const std::string socket = dir + "/events.sock";
  const std::string output = opt.output.empty() ? DefaultOutput() : opt.output;

  Session session;
  if (std::string e = session.Start(socket, output); !e.empty()) {
    Complain(e);
    rmdir(dir.c_str());
    return kUsage;
  }

  std::vector<std::string> env = ChildEnv(audit_lib, socket, python_hook);
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = opt.command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // While the command runs, terminal signals are its business; we wait like a shell.
  struct sigaction ign {}, fwd {}, old_int {}, old_quit {}, old_term {}, old_hup {};
  ign.sa_handler = SIG_IGN;
  fwd.sa_handler = Forward;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);

  // A pipe closed on exec tells us whether exec worked (and errno if not).
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    Complain(fmt::format("pipe: {}", std::strerror(errno)));
    return kUsage;
  }
  const pid_t child = fork();
  if (child < 0) {
    Complain(fmt::format("fork: {}", std::strerror(errno)));
    return kUsage;
  }
  if (child == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    close(exec_pipe[0]);
    execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!write(exec_pipe[1], &e, sizeof e);
    _exit(e == ENOENT ? 127 : 126);
  }
  g_child = child;
  sigaction(SIGTERM, &fwd, &old_term);
  sigaction(SIGHUP, &fwd, &old_hup);
  close(exec_pipe[1]);
  int exec_errno = 0;
  if (read(exec_pipe[0], &exec_errno, sizeof exec_errno) != sizeof exec_errno) exec_errno = 0;
  close(exec_pipe[0]);
  if (exec_errno != 0)
    Complain(fmt::format("cannot run {}: {}", text::Escape(opt.command.front()),
                         std::strerror(exec_errno)));

  // Serve until the command exits: a pidfd wakes us at once; without one, poll.
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
  // Children that outlive the command keep their connections: wait for them a little.
  session.Drain(/*idle_ms=*/200, /*cap_ms=*/3000);
  const std::string summary = session.Summary();
  const std::string finish_err = session.Finish();
  rmdir(dir.c_str());
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);

  if (!finish_err.empty()) Complain(finish_err);
  if (!opt.quiet || !finish_err.empty())
    Complain(fmt::format("{}: {}; trace {} ({})", text::Escape(opt.command.front()),
                         ExitText(status), text::Escape(output), summary));
  if (opt.analyse && finish_err.empty()) {
    const v1::Timeline timeline = model::BuildTimeline(store::LoadTraces({output}));
    ReportOptions ropt = opt.report;
    for (const auto& a : opt.command)
      ropt.title += (ropt.title.empty() ? "" : " ") + text::Escape(a);
    const int rc = EmitReport(timeline, ropt, stderr,
                              opt.quiet ? PrintWhen::kProblems : PrintWhen::kFindings);
    if (rc != kOk) return rc;
  }
  return ExitStatusOf(status);
}

}  // namespace ldscope::cli
