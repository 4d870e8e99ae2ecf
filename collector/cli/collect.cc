// `ldscope collect`: the embedded collector on its own, for long CI jobs whose
// programs are started elsewhere with LD_AUDIT and LDSCOPE_SOCKET set.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/session.h"

namespace ldscope::cli {

int Collect(const CollectOptions& opt) {
  std::string err;
  const std::string audit_lib = FindAuditLibrary(&err);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  const int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
  Session session;
  if (std::string e = session.Start(opt.socket, opt.output); !e.empty()) {
    Complain(e);
    return kUsage;
  }
  session.server().WatchExtra(sfd);
  std::string hook_err;
  const std::string python_hook = FindPythonHook(&hook_err);
  if (!opt.quiet)
    Complain(fmt::format("collecting on {} into {} until SIGINT/SIGTERM; trace programs with\n"
                         "  LD_AUDIT={} LDSCOPE_SOCKET={} COMMAND\n"
                         "and, to attribute Python's loads to imports, also PYTHONPATH={}",
                         opt.socket, opt.output, audit_lib.empty() ? "<libldscope_audit.so>" : audit_lib,
                         opt.socket, python_hook.empty() ? "<ldscope's python directory>" : python_hook));
  for (;;) {
    const auto r = session.server().Poll(-1);
    if (r == ipc::Server::PollResult::kExtraReady || r == ipc::Server::PollResult::kError) break;
  }
  session.server().WatchExtra(-1);
  session.Drain(/*idle_ms=*/100, /*cap_ms=*/1000);
  const std::string summary = session.Summary();
  const std::string finish_err = session.Finish();
  if (!finish_err.empty()) {
    Complain(finish_err);
    return kUsage;
  }
  if (!opt.quiet) Complain(fmt::format("stopped; trace {} ({})", opt.output, summary));
  return kOk;
}

}  // namespace ldscope::cli
