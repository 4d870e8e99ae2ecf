// The audit library under glibcs other than this machine's: Debian bullseye's 2.31
// (the oldest loader it supports well: before 2.35 no vDSO objopen, la_version offers 1)
// and trixie's 2.41 (dlclose reports DELETE before the objcloses), each run from its
// sysroot (tests/glibc/sysroot.sh) through its own ld.so, with its own Python and the
// dlprobe driver built against it.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/hwcaps.h"
#include "support/ld_debug.h"
#include "support/sequence.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kLibA = FIXTURES "/lib/libfix_a.so";
const std::string kLibB = FIXTURES "/lib/libfix_b.so";
const std::string kBad = FIXTURES "/lib/libfix_bad.so";

struct Glibc {
  const char* suite;
  const char* version;
  const char* python;   // python3.X
  unsigned offered_lav; // LAV_CURRENT of that loader
};

void PrintTo(const Glibc& g, std::ostream* os) { *os << g.suite; }

class OtherGlibc : public ::testing::TestWithParam<Glibc> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(Dir() + "/complete"))
        << "no sysroot in " << Dir() << ": the glibc_sysroots fixture (tests/glibc/sysroot.sh) "
        << "makes it; run the suite through ctest";
  }
  std::string Dir() const { return std::string(GLIBC_SYSROOTS "/") + GetParam().suite; }
  std::string Root() const { return Dir() + "/root"; }
  std::string Dlprobe() const { return Dir() + "/dlprobe"; }
  // argv run by that glibc's ld.so with that glibc's libraries.
  std::vector<std::string> Under(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {Root() + "/lib64/ld-linux-x86-64.so.2", "--library-path",
                               Root() + "/lib/x86_64-linux-gnu:" + Root() + "/usr/lib/x86_64-linux-gnu"});
    return argv;
  }
  std::vector<std::string> Run(const std::string& trace, const std::vector<std::string>& argv,
                               testing::Proc* r) const {
    std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--"};
    for (const auto& a : Under(argv)) cmd.push_back(a);
    *r = RunCmd(cmd);
    return testing::Sequence(testing::EventsOf(trace));
  }
};

// The loaded objects are those LD_DEBUG=files reports, all from the sysroot; the
// Python hook attributes the extension modules to their imports.
TEST_P(OtherGlibc, PythonLoadsWhatGlibcSays) {
  const std::string python = Root() + "/usr/bin/" + GetParam().python;
  const auto t = testing::ExpectSameAsGlibc(
      std::string("glibc_python_") + GetParam().suite,
      Under({python, "-c", "import ssl, hashlib, zlib, pyexpat; print('ok')"}), 8,
      {"PYTHONHOME=" + Root() + "/usr"});
  ASSERT_EQ(t.processes_size(), 1);
  const auto& p = t.processes(0);
  EXPECT_EQ(p.glibc_version(), GetParam().version);
  EXPECT_EQ(p.python().executable(), python);
  int ssl = 0;
  for (const auto& e : p.entries()) {
    if (!e.has_load() || e.load().reason() == v1::LOAD_VDSO) continue;
    EXPECT_EQ(e.load().object().path().rfind(Root() + "/", 0), 0u)
        << e.load().object().path() << " is not the sysroot's";
    if (e.load().object().path().find("/lib-dynload/_ssl.") != std::string::npos) {
      ++ssl;
      EXPECT_EQ(e.load().python().import_module(), "_ssl");
      EXPECT_EQ(e.load().python().top_module(), "ssl");
    }
  }
  EXPECT_EQ(ssl, 1);
}

// The loader's own version of events (tst-audit23): 2.31 opens no vDSO; 2.41 reports a
// dlclose's DELETE before its objcloses. glibc before 2.35 crashes in dlmopen of a
// new namespace under any auditor (a NULL namespace head, fixed by glibc commit
// 3dac3959), so 2.31 is driven without one.
TEST_P(OtherGlibc, EventSequence) {
  const auto dir = testing::ScratchDir(std::string("glibc_sequence_") + GetParam().suite);
  const bool v241_loader = std::string(GetParam().version) == "2.41";
  std::vector<std::string> argv = {Dlprobe(), "open", kLibB, "open", kBad, "close"};
  if (v241_loader) argv.insert(argv.end(), {"mopen", kLibA, "close"});
  testing::Proc r;
  const auto seq = Run(dir + "/t.ldscope", argv, &r);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> v231 = {
      "start", "open MAIN", "open LDSO", "activity ACTIVITY_ADD",
      "open libdl.so.2", "open libpthread.so.0", "open libc.so.6",  // built for 2.31: libdl
      "activity ACTIVITY_CONSISTENT", "preinit",
      "activity ACTIVITY_ADD", "open libfix_b.so", "activity ACTIVITY_CONSISTENT",
      // the failed dlopen: CONSISTENT before relocation fails, then the roll-back
      "activity ACTIVITY_ADD", "open libfix_bad.so", "activity ACTIVITY_CONSISTENT",
      "close libfix_bad.so unrelocated", "activity ACTIVITY_DELETE", "activity ACTIVITY_CONSISTENT",
      // dlclose: objclose, DELETE, CONSISTENT
      "close libfix_b.so", "activity ACTIVITY_DELETE", "activity ACTIVITY_CONSISTENT",
      // exit: objcloses without any la_activity (2.35 added DELETE/CONSISTENT there)
      "close MAIN", "close libdl.so.2", "close libpthread.so.0", "close libc.so.6", "close LDSO",
      "exit"};
  const std::vector<std::string> v241 = {
      "start", "open MAIN", "open LDSO", "activity ACTIVITY_ADD", "open VDSO", "open libc.so.6",
      "activity ACTIVITY_CONSISTENT", "preinit",
      "activity ACTIVITY_ADD", "open libfix_b.so", "activity ACTIVITY_CONSISTENT",
      // the failed dlopen: DELETE before the roll-back's objclose
      "activity ACTIVITY_ADD", "open libfix_bad.so", "activity ACTIVITY_CONSISTENT",
      "activity ACTIVITY_DELETE", "close libfix_bad.so unrelocated", "activity ACTIVITY_CONSISTENT",
      // dlclose: DELETE, objclose, CONSISTENT
      "activity ACTIVITY_DELETE", "close libfix_b.so", "activity ACTIVITY_CONSISTENT",
      // dlmopen(LM_ID_NEWLM): the new namespace gets an objopen for ld.so too
      "activity ACTIVITY_ADD", "open libfix_a.so ns=N", "open libfix_b.so ns=N",
      "open libc.so.6 ns=N", "open ld-linux-x86-64.so.2 ns=N", "activity ACTIVITY_CONSISTENT",
      // its dlclose empties the namespace: no CONSISTENT
      "activity ACTIVITY_DELETE", "close libfix_a.so ns=N", "close libfix_b.so ns=N",
      "close libc.so.6 ns=N", "close ld-linux-x86-64.so.2 ns=N",
      // exit
      "activity ACTIVITY_DELETE", "close MAIN", "close libc.so.6", "close LDSO",
      "activity ACTIVITY_CONSISTENT", "exit"};
  EXPECT_EQ(seq, v241_loader ? v241 : v231);
}

// A dlopen that fails (undefined symbol under RTLD_NOW) is a failure with its object
// rolled back, a dlclose is an unload, on both loaders.
TEST_P(OtherGlibc, FailedDlopenIsNotADlclose) {
  const auto dir = testing::ScratchDir(std::string("glibc_failed_") + GetParam().suite);
  const auto trace = dir + "/t.ldscope";
  testing::Proc r;
  Run(trace, {Dlprobe(), "open", kBad, "open", kLibB, "close"}, &r);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "open " + kBad + ": failed: " + kBad +
                       ": undefined symbol: fix_missing_symbol\nopen " + kLibB + ": ok\nclose\n");
  const auto t = testing::TimelineOf({trace});
  ASSERT_EQ(t.processes_size(), 1);
  std::vector<std::string> what;
  for (const auto& e : t.processes(0).entries()) {
    if (e.has_failed_dlopen()) {
      what.push_back("failed " + e.failed_dlopen().requested_name());
      for (const auto& o : e.failed_dlopen().rolled_back()) what.push_back("  rolled back " + o.path());
    } else if (e.has_unload() && !e.unload().at_exit()) {
      what.push_back("unload " + e.unload().object().path());
    } else if (e.has_load() && e.load().reason() == v1::LOAD_DLOPEN) {
      what.push_back(std::string(e.load().rolled_back() ? "load (rolled back) " : "load ") +
                     e.load().object().path());
    }
  }
  EXPECT_EQ(what, (std::vector<std::string>{"load (rolled back) " + kBad, "failed " + kBad,
                                            "  rolled back " + kBad, "load " + kLibB,
                                            "unload " + kLibB}));
}

// fork without a collector (LD_AUDIT + LDSCOPE_DIR): one trace file per process, the
// child tied to its parent; and the version the loader offered in la_version (which it
// accepted: there are events at all).
TEST_P(OtherGlibc, ForkAndLaVersion) {
  const auto dir = testing::ScratchDir(std::string("glibc_fork_") + GetParam().suite);
  auto r = RunCmd(Under({Dlprobe(), "open", kLibA, "fork", "open", kLibB}),
                  {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_DIR=" + dir});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = testing::TimelineOf({dir});
  testing::ExpectOpenForkOpen(r, t, kLibA, kLibB, GetParam().version);
  int starts = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    for (const auto& e : testing::EventsOf(f.path().string())) {
      if (!e.has_process_start()) continue;
      ++starts;
      EXPECT_EQ(e.process_start().lav_version(), GetParam().offered_lav);
    }
  }
  EXPECT_EQ(starts, 2);
}

INSTANTIATE_TEST_SUITE_P(Debian, OtherGlibc,
                         ::testing::Values(Glibc{"bullseye", "2.31", "python3.9", 1},
                                           Glibc{"trixie", "2.41", "python3.13", 2}),
                         [](const auto& info) { return std::string(info.param.suite); });

}  // namespace
}  // namespace ldscope
