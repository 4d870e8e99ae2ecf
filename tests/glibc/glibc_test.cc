// The audit library under glibcs other than this machine's: Debian bullseye's 2.31
// (the oldest loader it supports well: before 2.35 no vDSO objopen, la_version offers 1)
// and trixie's 2.41 (dlclose reports DELETE before the objcloses), each run from its
// sysroot (tests/glibc/sysroot.sh) through its own ld.so, with its own Python and the
// dlprobe driver built against it.
#include <gtest/gtest.h>

#include <filesystem>

#include <google/protobuf/util/json_util.h>

#include "ldscope_proto/report.pb.h"
#include "render/words.h"
#include "support/hwcaps.h"
#include "support/ld_debug.h"
#include "support/sequence.h"
#include "support/report_json.h"
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

// ---- What these loaders refuse as they load an object, and the fixes applied ----

// One Debian suite's sysroot, outside the parameterised suite.
struct Suite {
  std::string name;
  std::string Dir() const { return std::string(GLIBC_SYSROOTS "/") + name; }
  std::string Root() const { return Dir() + "/root"; }
  std::vector<std::string> Under(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {Root() + "/lib64/ld-linux-x86-64.so.2", "--library-path",
                               Root() + "/lib/x86_64-linux-gnu:" + Root() + "/usr/lib/x86_64-linux-gnu"});
    return argv;
  }
};

struct Reported {
  testing::Proc run;
  v1::Report report;
};

// argv under the suite's loader, traced, and its report.
Reported TraceUnder(const Suite& s, const std::string& name, const std::vector<std::string>& argv) {
  const auto dir = testing::ScratchDir("glibc_loadcheck_" + s.name + "_" + name);
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/t.ldscope", "--"};
  for (const auto& a : s.Under(argv)) cmd.push_back(a);
  Reported r;
  r.run = RunCmd(cmd);
  EXPECT_EQ(r.run.code, 0) << r.run.err;
  const auto j = RunCmd({LDSCOPE_BIN, "report", "--format", "json", dir + "/t.ldscope"});
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_TRUE(testing::ParseJson(j.out, &r.report)) << j.out;
  return r;
}

const v1::Finding* Only(const Reported& r, v1::FindingKind kind) {
  const v1::Finding* out = nullptr;
  for (const auto& f : r.report.findings()) {
    EXPECT_EQ(f.kind(), kind) << f.message();
    if (f.kind() == kind) out = &f;
  }
  EXPECT_NE(out, nullptr) << r.run.out;
  return out;
}

std::string FixText(const v1::Finding& f, v1::FixAction action) {
  for (const auto& x : f.fixes())
    if (x.action() == action) return x.text();
  ADD_FAILURE() << "no fix " << render::EnumWord(action) << ": " << f.message();
  return "";
}

void ExpectClean(const Reported& r, const std::string& lib) {
  EXPECT_EQ(r.run.out, "open " + lib + ": ok\n");
  EXPECT_EQ(r.report.findings_size(), 0) << r.report.DebugString();
}

void Build(const std::vector<std::string>& argv) {
  const auto r = RunCmd(argv);
  ASSERT_EQ(r.code, 0) << r.err;
}

// A library built here (glibc 2.36) starts a thread: it needs GLIBC_2.34, which bullseye's
// 2.31 lacks. Both fixes the finding words, applied: a build for that glibc (against its
// sysroot), and a newer distribution (trixie's 2.41).
TEST(NeedsNewerGlibc, BullseyeAndTheFixes) {
  const Suite bullseye{"bullseye"}, trixie{"trixie"};
  const std::string lib = FIXTURES "/classes/loadcheck/glibc/libthreads.so";
  const Reported before = TraceUnder(bullseye, "before", {bullseye.Dir() + "/dlprobe", "open", lib});
  EXPECT_NE(before.run.out.find("version `GLIBC_2.34' not found (required by " + lib + ")"), std::string::npos)
      << before.run.out;
  const v1::Finding* f = Only(before, v1::NEEDS_NEWER_GLIBC);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->headline(), "libthreads.so failed to load: it needs glibc 2.34, this system has glibc 2.31");
  EXPECT_EQ(f->severity(), v1::WARNING);  // a C program's dlopen: it may go on without it
  EXPECT_NE(FixText(*f, v1::FIX_OLDER_GLIBC_BUILD).find("made for glibc 2.31 or older"), std::string::npos);
  EXPECT_NE(FixText(*f, v1::FIX_NEWER_DISTRIBUTION).find("whose glibc is 2.34 or newer"), std::string::npos);
  // A build against bullseye's glibc.
  const auto dir = testing::ScratchDir("glibc_loadcheck_rebuilt");
  const std::string usr = bullseye.Root() + "/usr/lib/x86_64-linux-gnu";
  ASSERT_NO_FATAL_FAILURE(Build({CC_BIN, "--sysroot=" + bullseye.Root(), "-B" + usr, "-L" + usr,
                                 "-L" + bullseye.Root() + "/lib/x86_64-linux-gnu", "-shared", "-fPIC", "-o",
                                 dir + "/libthreads.so", FIXTURE_SRC "/glibc_new.c", "-lpthread"}));
  ExpectClean(TraceUnder(bullseye, "rebuilt", {bullseye.Dir() + "/dlprobe", "open", dir + "/libthreads.so"}),
              dir + "/libthreads.so");
  // The same file on a newer distribution.
  ExpectClean(TraceUnder(trixie, "newer", {trixie.Dir() + "/dlprobe", "open", lib}), lib);
}

// A library that asks for an executable stack: glibc 2.41 refuses the dlopen, 2.31 makes
// the stack executable. The fixes, applied: trixie's patchelf --clear-execstack on a copy,
// and a rebuild with -z noexecstack.
TEST(ExecStackRefused, TrixieAndTheFixes) {
  const Suite bullseye{"bullseye"}, trixie{"trixie"};
  const std::string lib = FIXTURES "/classes/loadcheck/execstack/libexecstack.so";
  const Reported before = TraceUnder(trixie, "execstack", {trixie.Dir() + "/dlprobe", "open", lib});
  EXPECT_EQ(before.run.out, "open " + lib + ": failed: " + lib +
                                ": cannot enable executable stack as shared object requires: Invalid argument\n");
  const v1::Finding* f = Only(before, v1::EXECSTACK_REFUSED);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), v1::ERROR);
  EXPECT_EQ(f->headline(),
            "libexecstack.so failed to load: it asks for an executable stack, which glibc 2.41 refuses "
            "to enable after start-up");
  // Older glibcs make the stack executable: nothing to report.
  ExpectClean(TraceUnder(bullseye, "execstack", {bullseye.Dir() + "/dlprobe", "open", lib}), lib);
  // patchelf --clear-execstack (trixie's patchelf 0.18, run by its own loader) on a copy.
  const auto dir = testing::ScratchDir("glibc_loadcheck_execstack");
  std::filesystem::copy_file(lib, dir + "/libexecstack.so");
  const std::string fix = FixText(*f, v1::FIX_CLEAR_EXECSTACK);
  ASSERT_NE(fix.find("patchelf --clear-execstack " + lib), std::string::npos) << fix;
  const auto p =
      RunCmd(trixie.Under({trixie.Root() + "/usr/bin/patchelf", "--clear-execstack", dir + "/libexecstack.so"}));
  ASSERT_EQ(p.code, 0) << p.err;
  ExpectClean(TraceUnder(trixie, "cleared", {trixie.Dir() + "/dlprobe", "open", dir + "/libexecstack.so"}),
              dir + "/libexecstack.so");
  // Rebuilt with -z noexecstack.
  ASSERT_NE(FixText(*f, v1::FIX_REBUILD_NOEXECSTACK).find("-Wl,-z,noexecstack"), std::string::npos);
  ASSERT_NO_FATAL_FAILURE(Build({CC_BIN, "-shared", "-fPIC", "-DFIX_NAME=execstack_init", "-Wl,-z,noexecstack", "-o",
                                 dir + "/rebuilt.so", FIXTURE_SRC "/fix.c"}));
  ExpectClean(TraceUnder(trixie, "rebuilt", {trixie.Dir() + "/dlprobe", "open", dir + "/rebuilt.so"}),
              dir + "/rebuilt.so");
}

// The static TLS layout of these glibcs (bullseye's 2.31 with the per-namespace surplus
// backported, trixie's 2.41 with its rseq block): libtls_big.so's 1,800 bytes of
// initial-exec TLS fit under ldscope's audit module and not without it, on both. The
// report says so (a warning), and its tunable, applied, loads it untraced.
TEST(StaticTls, FitsOnlyTracedOnOtherGlibcs) {
  const std::string lib = FIXTURES "/classes/loadcheck/initial-exec/libtls_big.so";
  for (const Suite& s : {Suite{"bullseye"}, Suite{"trixie"}}) {
    const std::vector<std::string> argv = {s.Dir() + "/dlprobe", "open", lib};
    const Reported traced = TraceUnder(s, "tls", argv);
    EXPECT_EQ(traced.run.out, "open " + lib + ": ok\n") << s.name;
    const auto bare = RunCmd(s.Under(argv));
    EXPECT_EQ(bare.out, "open " + lib + ": failed: " + lib + ": cannot allocate memory in static TLS block\n")
        << s.name;
    const v1::Finding* f = Only(traced, v1::STATIC_TLS_EXHAUSTED);
    ASSERT_NE(f, nullptr) << s.name;
    EXPECT_EQ(f->severity(), v1::WARNING) << s.name;
    const std::string fix = FixText(*f, v1::FIX_SET_TUNABLE);
    const std::string var = fix.substr(fix.find("GLIBC_TUNABLES="));
    EXPECT_EQ(RunCmd(s.Under(argv), {var}).out, "open " + lib + ": ok\n") << s.name << " " << var;
  }
}

}  // namespace
}  // namespace ldscope
