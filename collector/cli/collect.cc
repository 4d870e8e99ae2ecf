// `ldscope collect`: the embedded collector on its own, for long CI jobs whose
// programs are started elsewhere with LD_AUDIT and LDSCOPE_SOCKET set.
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/otlp.h"
#include "cli/session.h"
#include "net/http.h"
#include "store/output_file.h"

namespace ldscope::cli {
namespace {

// A socket left by a collector that was killed (SIGKILL, a crash) refuses connections:
// remove it, so that a restarted collector can serve the same path. A live collector's
// socket, or anything that is not a socket of ours, is an error.
Status ClearStaleSocket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
    return Error{fmt::format("cannot listen on {}: it exists and is not a socket of ours", path)};
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return Status::Ok();  // Listen says so
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Ok();  // Listen will fail and say why
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 || errno != ECONNREFUSED;
  close(fd);
  if (live) return Error{fmt::format("cannot listen on {}: another collector is serving it", path)};
  unlink(path.c_str());
  return Status::Ok();
}

// Traced programs send nothing to a socket whose directory is another user's, or writable
// by others without the sticky bit (README, "Security"): such a path is refused here too,
// so that the collector does not wait for programs that will never report.
Status CheckSocketDir(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return Status::Ok();  // Listen says why
  const bool own = st.st_uid == 0 || st.st_uid == getuid() || st.st_uid == geteuid();
  if (!own)
    return Error{
        fmt::format("cannot listen on {}: its directory {} belongs to another user (uid {}), "
                    "and traced programs send nothing to a socket there",
                    path, dir, st.st_uid)};
  if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0)
    return Error{
        fmt::format("cannot listen on {}: its directory {} is writable by every user "
                    "without the sticky bit, and traced programs send nothing to a "
                    "socket there",
                    path, dir)};
  return Status::Ok();
}

}  // namespace

int Collect(const CollectOptions& opt) {
  OtlpConfig otlp_config;
  if (!opt.otlp.empty()) {
    Result<OtlpConfig> parsed = OtlpConfigFromEnv(opt.otlp);
    if (!parsed.ok()) {
      Complain("collect --otlp: " + parsed.error());
      return kUsage;
    }
    otlp_config = std::move(parsed).value();
  }
  // Only named in the message below: collecting works without it.
  const Result<std::string> audit_lib = FindAuditLibrary();
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);  // a closed terminal or session: shut down cleanly too
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);  // an output pipe whose reader is gone is a write error
  const int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
  if (Status s = store::CheckOutputs({{"-o", opt.output}}, {opt.socket}); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  Session session;
  // --otlp converts the trace as it grows from the collector's in-memory copy of it.
  Status s = session.Prepare(opt.output, /*keep_copy=*/!opt.otlp.empty());
  if (!s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  s = CheckSocketDir(opt.socket);
  if (s.ok()) s = ClearStaleSocket(opt.socket);
  if (s.ok()) s = session.Listen(opt.socket);
  if (!s.ok()) {
    Complain(s.error());
    session.Abandon();
    return kUsage;
  }
  if (s = session.Begin(); !s.ok()) {
    Complain(s.error());
    session.Abandon();
    return kWriteFailed;
  }
  session.server().WatchExtra(sfd);
  if (opt.facts) session.ReadFactsEarly(/*keep_files=*/false);
  // Only named in the message below, like the audit library.
  const Result<std::string> python_hook = FindPythonHook();
  if (!opt.quiet)
    Complain(fmt::format("collecting on {} into {} until SIGINT/SIGTERM/SIGHUP; trace programs with\n"
                         "  LD_AUDIT={} LDSCOPE_SOCKET={} COMMAND\n"
                         "and, to attribute Python's loads to imports, also PYTHONPATH={}",
                         opt.socket, opt.output, audit_lib.ok() ? *audit_lib : "<libldscope_audit.so>",
                         opt.socket, python_hook.ok() ? *python_hook : "<ldscope's python directory>"));
  std::unique_ptr<OtlpStream> otlp;
  if (!opt.otlp.empty()) otlp = std::make_unique<OtlpStream>(otlp_config, opt.otlp);
  for (;;) {
    // With --otlp, wake up now and then to hand the stream what arrived.
    const auto r = session.server().Poll(otlp ? 500 : -1);
    if (otlp) otlp->Offer(session.trace_copy());
    if (r == ipc::Server::PollResult::kExtraReady || r == ipc::Server::PollResult::kError) break;
  }
  session.server().WatchExtra(-1);
  session.Drain(kCollectDrainPollMs, kCollectDrainCapMs);
  if (opt.facts) session.WriteFacts(kFactsLimitMs);
  std::string summary = session.Summary();
  if (otlp) {
    // What is left, with at most 3 s for the endpoint to take it.
    otlp->Finish(session.trace_copy(), /*wait_ms=*/3000);
    summary += "; " + otlp->Summary();
  }
  if (const Status finished = session.Finish(); !finished.ok()) {
    Complain(finished.error());
    return kWriteFailed;
  }
  if (!opt.quiet) Complain(fmt::format("stopped; trace {} ({})", opt.output, summary));
  return kOk;
}

}  // namespace ldscope::cli
