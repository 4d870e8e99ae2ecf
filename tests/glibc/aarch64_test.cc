// The audit library on aarch64: cross-built (tests/glibc/aarch64), run under qemu-user
// by Debian trixie's arm64 glibc 2.41, whose ld.so accepts an auditor only if
// la_version answers exactly its LAV_CURRENT (2): events, fork, and the search
// candidates (aarch64 has no glibc-hwcaps subdirectories in 2.41) against glibc's own.
#include <gtest/gtest.h>

#include <dirent.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "support/sequence.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kDir = GLIBC_SYSROOTS "/trixie-arm64";
const std::string kRoot = kDir + "/root";
const std::string kAudit = AARCH64_BUILD "/bin/libldscope_audit.so";
const std::string kLibA = AARCH64_BUILD "/lib/libfix_a.so";
const std::string kLibB = AARCH64_BUILD "/lib/libfix_b.so";
const std::string kBad = AARCH64_BUILD "/lib/libfix_bad.so";

// argv run by the arm64 ld.so under qemu-user (a static qemu: the host's loader
// never sees the guest's LD_* variables).
std::vector<std::string> Under(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {QEMU_AARCH64, "-E", "LD_AUDIT=" + kAudit,
                             kRoot + "/lib/ld-linux-aarch64.so.1", "--library-path",
                             kRoot + "/lib/aarch64-linux-gnu"});
  return argv;
}

// What the arm64 ld.so says about itself under this emulator.
std::string Diagnostics() {
  auto r = RunCmd({QEMU_AARCH64, kRoot + "/lib/ld-linux-aarch64.so.1", "--list-diagnostics"});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

class Aarch64 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kDir + "/complete")) << "the glibc_sysroots fixture makes it";
    ASSERT_TRUE(std::filesystem::exists(kAudit)) << "the aarch64_build fixture makes it";
  }
};

// tst-audit23's sequence on aarch64 glibc 2.41 (as on x86-64: DELETE before objclose,
// ld.so opened in a dlmopen namespace); a vDSO only where the emulator maps one
// (qemu 7.2 does not).
TEST_F(Aarch64, EventSequence) {
  const auto dir = testing::ScratchDir("aarch64_sequence");
  const auto trace = dir + "/t.ldscope";
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--"};
  for (const auto& a : Under({kDir + "/dlprobe", "open", kLibB, "open", kBad, "close", "mopen",
                              kLibA, "close"}))
    cmd.push_back(a);
  auto r = RunCmd(cmd);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "open " + kLibB + ": ok\nopen " + kBad + ": failed: " + kBad +
                       ": undefined symbol: fix_missing_symbol\nclose\nmopen " + kLibA +
                       ": ok\nclose\n");
  std::vector<std::string> expected = {"start", "open MAIN", "open LDSO", "activity ACTIVITY_ADD"};
  if (Diagnostics().find("a_type=0x21\n") != std::string::npos) expected.push_back("open VDSO");
  const std::vector<std::string> rest = {
      "open libc.so.6", "activity ACTIVITY_CONSISTENT", "preinit",
      "activity ACTIVITY_ADD", "open libfix_b.so", "activity ACTIVITY_CONSISTENT",
      "activity ACTIVITY_ADD", "open libfix_bad.so", "activity ACTIVITY_CONSISTENT",
      "activity ACTIVITY_DELETE", "close libfix_bad.so unrelocated", "activity ACTIVITY_CONSISTENT",
      "activity ACTIVITY_DELETE", "close libfix_b.so", "activity ACTIVITY_CONSISTENT",
      "activity ACTIVITY_ADD", "open libfix_a.so ns=N", "open libfix_b.so ns=N",
      "open libc.so.6 ns=N", "open ld-linux-aarch64.so.1 ns=N", "activity ACTIVITY_CONSISTENT",
      "activity ACTIVITY_DELETE", "close libfix_a.so ns=N", "close libfix_b.so ns=N",
      "close libc.so.6 ns=N", "close ld-linux-aarch64.so.1 ns=N",
      "activity ACTIVITY_DELETE", "close MAIN", "close libc.so.6", "close LDSO",
      "activity ACTIVITY_CONSISTENT", "exit"};
  expected.insert(expected.end(), rest.begin(), rest.end());
  EXPECT_EQ(testing::Sequence(testing::EventsOf(trace)), expected);
}

// fork (LDSCOPE_DIR, no collector): two trace files, the child tied to its parent. The
// loader offered version 2 and took ldscope's answer (there are events at all).
TEST_F(Aarch64, ForkAndLaVersion) {
  const auto dir = testing::ScratchDir("aarch64_fork");
  auto r = RunCmd(Under({kDir + "/dlprobe", "open", kLibA, "fork", "open", kLibB}),
                  {"LDSCOPE_DIR=" + dir});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = testing::TimelineOf({dir});
  testing::ExpectOpenForkOpen(r, t, kLibA, kLibB, "2.41");
  int starts = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    for (const auto& e : testing::EventsOf(f.path().string())) {
      if (!e.has_process_start()) continue;
      ++starts;
      EXPECT_EQ(e.process_start().lav_version(), 2u);
    }
  }
  EXPECT_EQ(starts, 2);
}

// Every candidate ldscope recorded is one glibc tried (LD_DEBUG=libs), in order, and
// those in hwcaps subdirectories are exactly the ones `ld.so --list-diagnostics` says
// this glibc searches on this (emulated) CPU: none, on aarch64 glibc 2.41.
TEST_F(Aarch64, SearchCandidatesAndHwcapsSubdirectories) {
  const auto dir = testing::ScratchDir("aarch64_candidates");
  std::filesystem::create_directories(dir + "/t");
  auto r = RunCmd(Under({kDir + "/dlprobe", "open", kLibA, "open", "libm.so.6", "open",
                         "libfix_nowhere.so"}),
                  {"LDSCOPE_DIR=" + dir + "/t", "LD_DEBUG=libs", "LD_DEBUG_OUTPUT=" + dir + "/dbg"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> ours, glibc;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/t"))
    for (const auto& e : testing::EventsOf(f.path().string()))
      if (e.has_search() && !e.search().candidate().empty()) ours.push_back(e.search().candidate());
  static const std::regex find(R"(^\s*\d+:\s+find library=.* \[(\d+)\]; searching$)");
  static const std::regex trying(R"(^\s*\d+:\s+trying file=(.*)$)");
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("dbg.", 0) != 0) continue;
    std::ifstream in(f.path());
    bool ns0 = false;
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_match(line, m, find)) ns0 = m[1] == "0";
      else if (ns0 && std::regex_match(line, m, trying)) glibc.push_back(m[1]);
    }
  }
  EXPECT_EQ(ours, glibc);
  EXPECT_GE(glibc.size(), 5u);
  std::smatch m;
  const std::string diag = Diagnostics();
  ASSERT_TRUE(std::regex_search(diag, m, std::regex("dl_hwcaps_subdirs=\"([^\"]*)\""))) << diag;
  std::set<std::string> expected_subdirs, seen_subdirs;
  std::stringstream list(m[1].str());
  for (std::string s; std::getline(list, s, ':');) expected_subdirs.insert(s);
  for (const auto& c : ours) {
    const auto at = c.find("/glibc-hwcaps/");
    if (at != std::string::npos) seen_subdirs.insert(c.substr(at + 14, c.find('/', at + 14) - at - 14));
  }
  EXPECT_EQ(seen_subdirs, expected_subdirs);
}

}  // namespace
}  // namespace ldscope
