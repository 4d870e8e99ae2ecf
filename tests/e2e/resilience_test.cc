// Resilience: many processes at once, a stalled collector, rogue clients, peers of
// another user, secrets in the environment. Bounded in time; no timed assertions
// beyond the documented bounds.
#include <gtest/gtest.h>

#include <poll.h>
#include <cerrno>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include "ldscope_proto/events.pb.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kLibB = FIXTURES "/lib/libfix_b.so";

using testing::Collector;

std::string StartEvent(uint32_t pid) {
  v1::Event e;
  e.set_pid(pid);
  e.mutable_process_start()->set_exe("/rogue");
  e.mutable_process_start()->set_image_start_ns(pid);
  return e.SerializeAsString();
}

void Send(int fd, const std::string& bytes) { send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

// 64 processes, each 500 dlopen/dlclose cycles and a fork, under one `ldscope run`.
TEST(Resilience, SixtyFourProcessesCompleteStreams) {
  const auto dir = testing::ScratchDir("resilience_load");
  const std::string trace = dir + "/t.ldscope";
  const std::string one = std::string(DLPROBE) + " cycles 500 " + kLibB + " fork cycles 20 " + kLibB;
  const std::string script = "for i in $(seq 64); do " + one + " & done; wait";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", "/bin/sh", "-c",
                         script}, {}, {}, 600);
  ASSERT_EQ(r.code, 0) << r.err;
  // What the processes themselves counted: successful cycles per pid.
  std::map<uint32_t, int> counted;
  static const std::regex line("cycles [0-9]+: ([0-9]+) ok \\(pid ([0-9]+)\\)");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it)
    counted[static_cast<uint32_t>(std::stoul((*it)[2]))] += std::stoi((*it)[1]);
  EXPECT_EQ(counted.size(), 128u) << "64 processes and their 64 children";
  const auto t = testing::TimelineOf({trace});
  auto probes = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(probes.size(), 128u);
  uint64_t total_loads = 0;
  for (const auto* p : probes) {
    EXPECT_EQ(p->missing_seqs(), 0u) << "pid " << p->pid();
    EXPECT_EQ(p->dropped(), 0u) << "pid " << p->pid();
    int loads = 0, unloads = 0;
    for (const auto& e : p->entries()) {
      loads += e.has_load() && e.load().object().path() == kLibB;
      unloads += e.has_unload() && !e.unload().at_exit() && e.unload().object().path() == kLibB;
    }
    EXPECT_EQ(loads, counted[p->pid()]) << "pid " << p->pid();
    EXPECT_EQ(unloads, counted[p->pid()]) << "pid " << p->pid();
    total_loads += static_cast<uint64_t>(loads);
  }
  EXPECT_EQ(total_loads, 64u * (500 + 20 + 20));
}

// A collector that stops reading: programs finish within the documented bound
// (kSendWaitMs, 500 ms, per stall), drops are counted exactly and reported once it
// reads again.
TEST(Resilience, StalledCollectorCostsBoundedTimeAndCountsDrops) {
  const auto dir = testing::ScratchDir("resilience_stall");
  const std::string mark = dir + "/phase1-done";
  const std::vector<std::string> steps = {DLPROBE, "cycles", "3000", kLibB, "mark", mark, "sleep",
                                          "700", "cycles", "5", kLibB};
  const auto baseline = RunCmd(steps);
  ASSERT_EQ(baseline.code, 0);
  std::filesystem::remove(mark);
  Collector c(dir);
  ASSERT_TRUE(std::filesystem::exists(c.socket));
  // Connections are accepted, but nothing is read while it is stopped.
  kill(c.pid, SIGSTOP);
  std::thread resume([&] {
    for (int i = 0; i < 3000 && !std::filesystem::exists(mark); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    kill(c.pid, SIGCONT);
  });
  const auto traced = RunCmd(steps, {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + c.socket});
  resume.join();
  EXPECT_EQ(traced.code, 0);
  static const std::regex pid("pid [0-9]+");
  EXPECT_EQ(std::regex_replace(traced.out, pid, "pid N"), std::regex_replace(baseline.out, pid, "pid N"));
  EXPECT_LT(traced.seconds, baseline.seconds + 0.5 + 1.0) << "stall bound (+1 s of slack)";
  const std::string summary = c.Stop();
  const auto t = testing::TimelineOf({c.trace});
  ASSERT_EQ(t.processes_size(), 1);
  const auto& p = t.processes(0);
  EXPECT_GT(p.dropped(), 0u) << "the queue overflowed while the collector was stopped";
  EXPECT_EQ(p.dropped(), p.missing_seqs()) << "every drop counted exactly";
  EXPECT_TRUE(p.exited()) << "the exit event, carrying the final count, arrived";
  EXPECT_NE(summary.find(std::to_string(p.dropped()) + " dropped"), std::string::npos) << summary;
}

// The Python hook with a collector that stops (SIGSTOP) or dies (SIGKILL) mid-run: the
// program's output and status stay its own; while stopped, the hook waits once, then
// drops, and every drop is counted exactly.
TEST(Resilience, PythonHookWithStoppedOrKilledCollector) {
  const std::string script = PYFIXTURES_DIR "/app/collector_faults.py";
  const auto bare = RunCmd({"/usr/bin/python3", script, "stop", "0"});
  ASSERT_EQ(bare.code, 0) << bare.err;
  ASSERT_EQ(bare.out, "done 7\n");
  for (const std::string mode : {"stop", "kill"}) {
    SCOPED_TRACE(mode);
    Collector c(testing::ScratchDir("resilience_python_" + mode));
    const auto r = RunCmd({"/usr/bin/python3", script, mode, std::to_string(c.pid)},
                          {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + c.socket,
                           "PYTHONPATH=" PYTHON_HOOK_DIR});
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.out, bare.out);
    EXPECT_EQ(r.err, bare.err);
    c.Stop();
    if (mode == "kill") continue;
    const auto t = testing::TimelineOf({c.trace});
    const v1::ProcessTimeline* p = nullptr;
    for (const auto& q : t.processes())
      if (q.start_reason() == v1::START_EXEC) p = &q;
    ASSERT_NE(p, nullptr);
    EXPECT_GT(p->python().dropped(), 0u) << "the queue overflowed while the collector was stopped";
    EXPECT_EQ(p->python().dropped(), p->python().missing_seqs()) << "every drop counted exactly";
    bool resumed = false;
    for (const auto& im : p->imports()) resumed |= im.module() == "wave" && im.ended();
    EXPECT_TRUE(resumed) << "the import after the collector resumed arrived";
  }
}

// Rogue clients are disconnected and counted; a real program's trace beside them is
// intact.
TEST(Resilience, RogueClientsAreDisconnectedOthersUnharmed) {
  const auto dir = testing::ScratchDir("resilience_rogue");
  Collector c(dir);
  ASSERT_TRUE(std::filesystem::exists(c.socket));
  std::vector<int> bad;
  {  // random bytes
    const int fd = testing::ConnectSeqpacket(c.socket);
    Send(fd, std::string("\x0a\xff\xff\xff\xff\x0f garbage that is not protobuf", 36));
    bad.push_back(fd);
  }
  {  // oversized frame after a valid start
    const int fd = testing::ConnectSeqpacket(c.socket);
    Send(fd, StartEvent(900001));
    const int big = 200 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    Send(fd, std::string(100 * 1024, 'x'));
    bad.push_back(fd);
  }
  {  // truncated frame
    const int fd = testing::ConnectSeqpacket(c.socket);
    Send(fd, StartEvent(900002));
    v1::Event e;
    e.set_pid(900002);
    e.mutable_search()->set_name("libtruncated.so.1");
    const std::string full = e.SerializeAsString();
    Send(fd, full.substr(0, full.size() - 5));
    bad.push_back(fd);
  }
  {  // no ProcessStart first
    const int fd = testing::ConnectSeqpacket(c.socket);
    v1::Event e;
    e.set_pid(900003);
    e.mutable_search()->set_name("x");
    Send(fd, e.SerializeAsString());
    bad.push_back(fd);
  }
  {  // another pid on the same connection
    const int fd = testing::ConnectSeqpacket(c.socket);
    Send(fd, StartEvent(900004));
    Send(fd, StartEvent(900005));
    bad.push_back(fd);
  }
  for (int fd : bad) {
    EXPECT_TRUE(testing::ServerHungUp(fd));
    close(fd);
  }
  // Valid frames with absurd values: accepted, and survivable downstream.
  const int odd = testing::ConnectSeqpacket(c.socket);
  Send(odd, StartEvent(900006));
  v1::Event e;
  e.set_pid(900006);
  e.set_seq(~uint64_t{0} >> 1);
  e.mutable_objopen()->set_id(~uint64_t{0});
  e.mutable_objopen()->set_lmid(-999);
  e.mutable_objopen()->set_base(~uint64_t{0});
  e.mutable_objopen()->set_path(std::string(5000, '/'));
  Send(odd, e.SerializeAsString());
  close(odd);
  const auto r = RunCmd({DLPROBE, "open", kLibB, "close"},
                        {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + c.socket});
  EXPECT_EQ(r.code, 0);
  const std::string summary = c.Stop();
  EXPECT_NE(summary.find("5 bad clients disconnected"), std::string::npos) << summary;
  const auto t = testing::TimelineOf({c.trace});
  const auto probes = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0]->missing_seqs(), 0u);
  EXPECT_TRUE(probes[0]->exited());
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "show", c.trace}).code, 0);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", c.trace}).code, 0);
}

TEST(Security, PrivateDirectoryPeerCredentialsAndSecrets) {
  const auto dir = testing::ScratchDir("security");
  // The run's socket lives in a 0700 directory.
  const auto mode = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/m.ldscope", "--",
                            "/bin/sh", "-c", "stat -c %a \"$(dirname \"$LDSCOPE_SOCKET\")\""});
  EXPECT_EQ(mode.out, "700\n");
  // Environment values other than loader-relevant ones never reach a trace.
  const std::string trace = dir + "/s.ldscope";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", DLPROBE},
                        {"AWS_SECRET_ACCESS_KEY=hunter2-very-secret", "LD_LIBRARY_PATH=/opt/visible-dir"});
  ASSERT_EQ(r.code, 0);
  const std::string bytes = testing::ReadFile(trace);
  EXPECT_EQ(bytes.find("hunter2-very-secret"), std::string::npos);
  EXPECT_NE(bytes.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << "the name is kept";
  EXPECT_NE(bytes.find("/opt/visible-dir"), std::string::npos);
  // A peer of another uid is refused (SO_PEERCRED), even if it can reach the socket.
  ASSERT_EQ(geteuid(), 0u) << "this part switches to another uid: run the suite as root";
  Collector c(dir);
  ASSERT_TRUE(std::filesystem::exists(c.socket));
  chmod(c.socket.c_str(), 0777);
  chmod(dir.c_str(), 0755);
  const pid_t child = fork();
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
    const int fd = testing::ConnectSeqpacket(c.socket);
    if (fd < 0) _exit(4);
    Send(fd, StartEvent(getpid()));
    _exit(testing::ServerHungUp(fd) ? 0 : 5);
  }
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  const std::string summary = c.Stop();
  EXPECT_NE(summary.find("1 peers of another user refused"), std::string::npos) << summary;
  EXPECT_EQ(testing::TimelineOf({c.trace}).processes_size(), 0);
}

}  // namespace
}  // namespace ldscope
