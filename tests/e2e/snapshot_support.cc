// See snapshot_support.h.
#include "e2e/snapshot_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ldscope::testing {

Waiting::Waiting(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  in_ = in[1];
  // Until "ready\n", or 30 s.
  for (int waited = 0; waited < 30000 && said_.find("ready\n") == std::string::npos;) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) {
      waited += 100;
      continue;
    }
    char buf[512];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    said_.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  ready_ = said_.find("ready\n") != std::string::npos;
}

void Waiting::Release() {
  if (in_ >= 0) close(in_);
  in_ = -1;
}

int Waiting::Reap() {
  Release();
  int status = 0;
  if (pid_ > 0 && !reaped_) {
    // Never more than 30 s: then it is killed (a test failure says why elsewhere).
    for (int i = 0; i < 3000; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        break;
      }
      usleep(10000);
    }
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      reaped_ = true;
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Waiting::~Waiting() { Reap(); }

}  // namespace ldscope::testing
