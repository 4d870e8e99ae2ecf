// The collector's socket is a boundary between users: a traced program (the audit library
// and the Python hook) sends nothing to a socket that another user listens on, or whose
// directory another user owns or anyone may write to (README, "Security"), and runs as it
// would untraced. The other user here is a real listener of uid 65534 (the suite runs as
// root, as its other suites that change users do).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

constexpr uid_t kOther = 65534;
const std::string kLibB = FIXTURES "/lib/libfix_b.so";

// A SOCK_SEQPACKET listener at `path` in a child process running as another user: it
// accepts every connection and counts the connections and the bytes it receives until
// Stop().
class Squatter {
 public:
  Squatter(const std::string& path, uid_t uid) {
    int ready[2], stop[2];
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(stop), 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(stop[1]);
      Serve(path, uid, ready[1], stop[0]);
    }
    close(ready[1]);
    close(stop[0]);
    result_ = ready[0];
    stop_ = stop[1];
    char c = 0;
    listening_ = read(result_, &c, 1) == 1 && c == 'R';
  }
  ~Squatter() {
    if (pid_ > 0) Stop();
  }
  bool listening() const { return listening_; }
  // Ends the listener; returns {connections, bytes} it saw.
  std::pair<long, long> Stop() {
    close(stop_);
    long conns = -1, bytes = -1;
    char buf[64] = {};
    const ssize_t n = read(result_, buf, sizeof buf - 1);
    if (n > 0) sscanf(buf, "%ld %ld", &conns, &bytes);
    close(result_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return {conns, bytes};
  }

 private:
  [[noreturn]] static void Serve(const std::string& path, uid_t uid, int ready, int stop) {
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(3);
    const int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 64) != 0) _exit(4);
    if (write(ready, "R", 1) != 1) _exit(5);
    long conns = 0, bytes = 0;
    std::vector<pollfd> fds = {{stop, POLLIN, 0}, {lfd, POLLIN, 0}};
    for (;;) {
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[1].revents & POLLIN) {
        const int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          ++conns;
          fds.push_back({c, POLLIN, 0});
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
        char buf[65536];
        const ssize_t n = recv(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) bytes += n;
        if (n == 0) fds[i].events = 0;  // ended
      }
      if (fds[0].revents != 0) break;  // the test is done
    }
    // What is still queued counts too.
    for (size_t i = 2; i < fds.size(); ++i) {
      char buf[65536];
      for (ssize_t n; (n = recv(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT)) > 0;) bytes += n;
    }
    char out[64];
    const int len = snprintf(out, sizeof out, "%ld %ld", conns, bytes);
    if (write(ready, out, static_cast<size_t>(len)) != len) _exit(6);
    _exit(0);
  }

  pid_t pid_ = -1;
  int result_ = -1, stop_ = -1;
  bool listening_ = false;
};

// A traced C program and a Python program with the hook, each run untraced first: the
// same exit status and output when LDSCOPE_SOCKET names `socket`.
void ExpectUnchanged(const std::string& socket) {
  const std::vector<std::string> probe = {DLPROBE, "open", kLibB, "exit", "7"};
  const auto plain = RunCmd(probe, {}, {"LD_AUDIT", "LDSCOPE_SOCKET", "LDSCOPE_DIR"});
  ASSERT_EQ(plain.code, 7) << plain.err;
  const auto traced = RunCmd(probe, {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + socket}, {"LDSCOPE_DIR"});
  EXPECT_EQ(traced.code, plain.code) << traced.err;
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_EQ(traced.err, plain.err);
  const std::vector<std::string> py = {"/usr/bin/python3", "-c", "import json, ctypes; print(json.dumps([1]))"};
  const auto py_plain = RunCmd(py, {}, {"LD_AUDIT", "LDSCOPE_SOCKET", "LDSCOPE_DIR", "PYTHONPATH"});
  ASSERT_EQ(py_plain.code, 0) << py_plain.err;
  const auto py_traced =
      RunCmd(py, {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + socket, "PYTHONPATH=" PYTHON_HOOK_DIR}, {"LDSCOPE_DIR"});
  EXPECT_EQ(py_traced.code, py_plain.code) << py_traced.err;
  EXPECT_EQ(py_traced.out, py_plain.out);
  EXPECT_EQ(py_traced.err, py_plain.err);
}

// Another user created the socket first in a directory everyone may create files in
// (sticky, as /tmp): the directory passes, the listener does not (SO_PEERCRED).
TEST(SocketTrust, AnotherUsersListenerReceivesNothing) {
  ASSERT_EQ(geteuid(), 0u) << "the squatter switches to another uid: run the suite as root";
  const std::string dir = testing::ScratchDir("trust_squatter") + "/tmp";
  std::filesystem::create_directories(dir);
  ASSERT_EQ(chmod(dir.c_str(), 01777), 0);
  const std::string socket = dir + "/x.sock";
  Squatter squatter(socket, kOther);
  ASSERT_TRUE(squatter.listening());
  ExpectUnchanged(socket);
  const auto [conns, bytes] = squatter.Stop();
  EXPECT_EQ(bytes, 0) << "over " << conns << " connections";
  // A collector of ours refuses the squatted path too (it is another user's socket).
  const auto c = RunCmd({LDSCOPE_BIN, "collect", "--socket", socket, "-o", dir + "/../t.ldscope"});
  EXPECT_EQ(c.code, 2);
  EXPECT_EQ(c.err, "ldscope: cannot listen on " + socket + ": it exists and is not a socket of ours\n");
}

// The socket's directory belongs to another user, who listens there.
TEST(SocketTrust, DirectoryOfAnotherUserIsNotUsed) {
  ASSERT_EQ(geteuid(), 0u) << "the squatter switches to another uid: run the suite as root";
  const std::string dir = testing::ScratchDir("trust_other_dir") + "/theirs";
  std::filesystem::create_directories(dir);
  ASSERT_EQ(chown(dir.c_str(), kOther, kOther), 0);
  const std::string socket = dir + "/x.sock";
  Squatter squatter(socket, kOther);
  ASSERT_TRUE(squatter.listening());
  ExpectUnchanged(socket);
  const auto [conns, bytes] = squatter.Stop();
  EXPECT_EQ(conns, 0) << "not even connected to";
  EXPECT_EQ(bytes, 0);
}

// A directory anyone may write to without the sticky bit (another user could replace the
// socket in it): nothing is sent even to our own listener there, and `collect` refuses to
// listen there, saying why.
TEST(SocketTrust, DirectoryWritableByOthersIsNotUsed) {
  const std::string dir = testing::ScratchDir("trust_open_dir") + "/open";
  std::filesystem::create_directories(dir);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const std::string socket = dir + "/x.sock";
  const int lfd = testing::ListenSeqpacket(socket);
  ExpectUnchanged(socket);
  ASSERT_EQ(fcntl(lfd, F_SETFL, O_NONBLOCK), 0);  // nothing may be waiting
  bool connected = true;
  const auto got = testing::ReceiveDatagrams(lfd, &connected);
  EXPECT_FALSE(connected);
  EXPECT_TRUE(got.empty());
  std::filesystem::remove(socket);
  const auto c = RunCmd({LDSCOPE_BIN, "collect", "--socket", socket, "-o", dir + "/../t.ldscope"});
  EXPECT_EQ(c.code, 2);
  EXPECT_EQ(c.err, "ldscope: cannot listen on " + socket + ": its directory " + dir +
                       " is writable by every user without the sticky bit, and traced programs "
                       "send nothing to a socket there\n");
  EXPECT_FALSE(std::filesystem::exists(socket));
  // The same directory with the sticky bit (as /tmp) is used.
  ASSERT_EQ(chmod(dir.c_str(), 01777), 0);
  testing::Collector collector(dir);
  const auto r = RunCmd({DLPROBE, "open", kLibB}, collector.Env());
  EXPECT_EQ(r.code, 0) << r.err;
  collector.Stop();
  const auto t = testing::TimelineOf({collector.trace});
  EXPECT_EQ(testing::ByExe(t, "/dlprobe").size(), 1u);
}

}  // namespace
}  // namespace ldscope
