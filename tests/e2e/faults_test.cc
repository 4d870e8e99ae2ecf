// Faults: a collector that dies mid-run, no collector at all, a setuid program. The
// traced program must behave exactly as it would untraced.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kLibA = FIXTURES "/lib/libfix_a.so";
const std::string kLibB = FIXTURES "/lib/libfix_b.so";

std::vector<std::string> Steps(const std::string& sleep_ms) {
  return {DLPROBE, "open", kLibB, "sleep", sleep_ms, "open", kLibA, "fork", "open",
          FIXTURES "/lib/threads/libfix_t0.so", "exit", "7"};
}

TEST(Faults, CollectorKilledMidRun) {
  const auto dir = testing::ScratchDir("faults_killed");
  const auto baseline = RunCmd(Steps("600"));
  ASSERT_EQ(baseline.code, 7);
  const std::string sock = dir + "/c.sock";
  const pid_t collector = fork();
  if (collector == 0) {
    execl(LDSCOPE_BIN, LDSCOPE_BIN, "collect", "-q", "--socket", sock.c_str(), "-o",
          (dir + "/t.ldscope").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 200 && !std::filesystem::exists(sock); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(sock));
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(collector, SIGKILL);
  });
  const auto traced = RunCmd(Steps("600"), {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + sock});
  killer.join();
  int st = 0;
  waitpid(collector, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st)) << "the collector was killed while the program ran";
  EXPECT_EQ(traced.code, baseline.code);
  EXPECT_EQ(traced.out, baseline.out);
  EXPECT_EQ(traced.err, baseline.err);
  EXPECT_FALSE(traced.timed_out);
  EXPECT_LT(traced.seconds, baseline.seconds + 2.0) << "no hang on a dead collector";
  // What arrived before the kill is a readable trace.
  const auto t = testing::TimelineOf({dir + "/t.ldscope"});
  ASSERT_GE(t.processes_size(), 1);
  EXPECT_EQ(t.processes(0).exe(), DLPROBE);
}

TEST(Faults, NoCollectorChangesNothing) {
  const auto baseline = RunCmd(Steps("0"));
  ASSERT_EQ(baseline.code, 7);
  for (const auto& env : std::vector<std::vector<std::string>>{
           {"LD_AUDIT=" AUDIT_LIB},
           {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=/nonexistent/dir/sock"},
           {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_DIR=/nonexistent/dir"}}) {
    const auto r = RunCmd(Steps("0"), env, {"LDSCOPE_SOCKET", "LDSCOPE_DIR"});
    EXPECT_EQ(r.code, 7) << env.back();
    EXPECT_EQ(r.out, baseline.out) << env.back();
    // An explicit LDSCOPE_DIR that cannot be used says so, once (README).
    const std::string said =
        env.back().rfind("LDSCOPE_DIR=", 0) == 0
            ? "ldscope: cannot create a trace file in LDSCOPE_DIR=/nonexistent/dir (ENOENT: no "
              "such directory); this process is not traced\n"
            : "";
    EXPECT_EQ(r.err, said + baseline.err) << env.back();
  }
}

// glibc ignores LD_AUDIT paths with '/' for setuid programs; ldscope must not try to
// get around that, and the program must run normally.
TEST(Faults, SetuidProgramRunsNormallyAndUntraced) {
  ASSERT_EQ(geteuid(), 0u) << "this test makes a setuid-nobody binary: run the suite as root";
  const auto dir = testing::ScratchDir("faults_setuid");
  chmod(dir.c_str(), 0755);
  const std::string suid = dir + "/dlprobe-suid";
  std::filesystem::copy_file(DLPROBE, suid);
  ASSERT_EQ(chown(suid.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(suid.c_str(), 04755), 0);
  const auto baseline = RunCmd({suid, "open", "libm.so.6", "exit", "5"});
  ASSERT_EQ(baseline.code, 5) << baseline.err;
  const auto trace = dir + "/t.ldscope";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", "/bin/sh", "-c",
                      suid + " open libm.so.6 exit 5; echo sh-after $?"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, baseline.out + "sh-after 5\n");
  const auto t = testing::TimelineOf({trace});
  EXPECT_EQ(testing::ByExe(t, "/dlprobe-suid").size(), 0u) << "the setuid program is not traced";
  EXPECT_GE(t.processes_size(), 1) << "the shell around it is";
}

}  // namespace
}  // namespace ldscope
