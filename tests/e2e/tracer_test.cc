// End to end: `ldscope run` over the dlprobe driver, checked event by event (the
// sequences glibc's own elf/tst-audit23 checks) and as whole `show` outputs.
#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <map>
#include <set>

#include <gnu/libc-version.h>

#include "store/trace_file.h"
#include "support/hwcaps.h"
#include "support/sequence.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kLibA = FIXTURES "/lib/libfix_a.so";
const std::string kLibB = FIXTURES "/lib/libfix_b.so";
const std::string kBad = FIXTURES "/lib/libfix_bad.so";

using testing::EventsOf;
using testing::Sequence;

TEST(Tracer, StartupDlopenDlmopenDlcloseExitSequence) {
  const auto dir = testing::ScratchDir("tracer_sequence");
  const auto trace = dir + "/t.ldscope";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibB, "mopen",
                kLibA, "close", "close"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "open " + kLibB + ": ok\nmopen " + kLibA + ": ok\nclose\nclose\n");
  EXPECT_EQ(r.err, "") << "ldscope -q prints nothing on success";
  const auto events = EventsOf(trace);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq(), i) << "no gaps";
  // glibc 2.36 order (docs/LOADER.md). dlclose on 2.36-2.40: objclose, DELETE,
  // CONSISTENT. Startup: main, ld.so, ADD, vDSO, NEEDED closure, CONSISTENT, preinit.
  std::vector<std::string> expected = {
      "start",
      "open MAIN",
      "open LDSO",
      "activity ACTIVITY_ADD",
      "open VDSO",
      "open libc.so.6",
      "activity ACTIVITY_CONSISTENT",
      "preinit",
      // dlopen(libfix_b.so)
      "activity ACTIVITY_ADD",
      "open libfix_b.so",
      "activity ACTIVITY_CONSISTENT",
      // dlmopen(LM_ID_NEWLM, libfix_a.so): a new namespace, with its own libfix_b (the
      // base namespace's copy does not count there) and its own libc
      "activity ACTIVITY_ADD",
      "open libfix_a.so ns=N",
      "open libfix_b.so ns=N",
      "open libc.so.6 ns=N",
      "activity ACTIVITY_CONSISTENT",
      // dlclose of the dlmopen handle: the namespace empties, so no CONSISTENT for it
      "close libfix_a.so ns=N",
      "close libfix_b.so ns=N",
      "close libc.so.6 ns=N",
      "activity ACTIVITY_DELETE",
      // dlclose of the dlopen handle
      "close libfix_b.so",
      "activity ACTIVITY_DELETE",
      "activity ACTIVITY_CONSISTENT",
      // exit: everything whose initialisers ran, never the vDSO
      "activity ACTIVITY_DELETE",
      "close MAIN",
      "close libc.so.6",
      "close LDSO",
      "activity ACTIVITY_CONSISTENT",
      "exit",
  };
  EXPECT_EQ(Sequence(events), expected);
}

// The invariants glibc's elf/tst-audit23 checks, on its scenario (dlopen a module,
// dlmopen(LM_ID_NEWLM, libc.so.6), exit): every object opened (but the vDSO) is closed
// once, each close follows a DELETE of its own namespace, ADD is always completed by
// CONSISTENT, and CONSISTENT is the loader's last word.
TEST(Tracer, TstAudit23Invariants) {
  const auto dir = testing::ScratchDir("tracer_audit23");
  const auto trace = dir + "/t.ldscope";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibB, "mopen",
                   "libc.so.6"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto events = EventsOf(trace);
  std::map<uint64_t, int64_t> lmid_of;  // object id -> namespace
  std::map<uint64_t, int> opened, closed;
  std::set<int64_t> namespaces;
  int last_act = -1;
  int64_t last_act_ns = -100;
  for (const auto& e : events) {
    if (e.has_objopen()) {
      lmid_of[e.objopen().id()] = e.objopen().lmid();
      namespaces.insert(e.objopen().lmid());
      if (!e.objopen().is_vdso()) ++opened[e.objopen().id()];
    } else if (e.has_activity()) {
      const int act = e.activity().kind();
      const int64_t ns = lmid_of.count(e.activity().id()) ? lmid_of[e.activity().id()] : -1;
      if (act == v1::ACTIVITY_ADD && last_act != -1) {
        EXPECT_EQ(last_act, v1::ACTIVITY_CONSISTENT) << "ADD while a namespace is in flux, seq " << e.seq();
      }
      if (act == v1::ACTIVITY_CONSISTENT && last_act == v1::ACTIVITY_ADD) {
        EXPECT_TRUE(ns == last_act_ns || ns == -1 || last_act_ns == -1) << "seq " << e.seq();
      }
      last_act = act;
      last_act_ns = ns;
    } else if (e.has_objclose()) {
      ++closed[e.objclose().id()];
      EXPECT_EQ(last_act, v1::ACTIVITY_DELETE) << "objclose after DELETE, seq " << e.seq();
      EXPECT_EQ(lmid_of[e.objclose().id()], last_act_ns) << "DELETE was for its namespace";
    }
  }
  EXPECT_EQ(last_act, v1::ACTIVITY_CONSISTENT);
  EXPECT_EQ(namespaces.size(), 2u) << "the application's namespace and the dlmopen one";
  EXPECT_EQ(opened.size(), 5u) << "executable, ld.so, libc, the module, libc in the new namespace";
  for (const auto& [id, n] : opened) {
    EXPECT_EQ(n, 1);
    EXPECT_EQ(closed[id], 1) << "object " << id << " closed exactly once";
  }
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().has_exit());
}

TEST(Tracer, FailedDlopenShowsOpenAndRollBack) {
  const auto dir = testing::ScratchDir("tracer_failed");
  const auto trace = dir + "/t.ldscope";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kBad, "open", kLibB,
                "close"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "open " + kBad + ": failed: " + kBad +
                       ": undefined symbol: fix_missing_symbol\nopen " + kLibB + ": ok\nclose\n");
  const auto t = testing::TimelineOf({trace});
  ASSERT_EQ(t.processes_size(), 1);
  const auto& p = t.processes(0);
  int failed = 0, unloads = 0;
  for (const auto& e : p.entries()) {
    if (e.has_failed_dlopen()) {
      ++failed;
      EXPECT_EQ(e.failed_dlopen().requested_name(), kBad);
      ASSERT_EQ(e.failed_dlopen().rolled_back_size(), 1);
      EXPECT_EQ(e.failed_dlopen().rolled_back(0).path(), kBad);
      EXPECT_EQ(e.failed_dlopen().requester().path(), DLPROBE);
    }
    if (e.has_load() && e.load().object().path() == kBad) {
      EXPECT_TRUE(e.load().rolled_back());
    }
    if (e.has_load() && e.load().object().path() == kLibB) {
      EXPECT_FALSE(e.load().rolled_back());
    }
    if (e.has_unload() && !e.unload().at_exit()) {
      ++unloads;
      EXPECT_EQ(e.unload().object().path(), kLibB) << "a plain dlclose is not a failure";
    }
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(unloads, 1);
}

// The whole `show` text, against a golden file (paths, pids, the glibc version and
// the CPU's hwcaps subdirectories normalised).
TEST(Tracer, ShowTextGolden) {
  const auto dir = testing::ScratchDir("tracer_golden");
  const auto trace = dir + "/t.ldscope";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibA, "open",
                kBad, "noload", "libfix_b.so", "close"},
               {}, {"LD_LIBRARY_PATH", "LD_PRELOAD"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto s = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ASSERT_EQ(s.code, 0) << s.err;
  std::string text = s.out;
  text = testing::ReplaceAll(text, FIXTURES, "${FIXTURES}");
  const auto timeline = testing::TimelineOf({trace});
  const auto& p = timeline.processes(0);
  text = testing::ReplaceAll(text, "process " + std::to_string(p.pid()) + ":", "process ${PID}:");
  text = testing::ReplaceAll(text, "parent pid " + std::to_string(p.ppid()), "parent pid ${PPID}");
  text = testing::ReplaceAll(text, "cwd " + p.cwd(), "cwd ${CWD}");
  text = testing::ReplaceAll(text, std::string("glibc ") + gnu_get_libc_version() + " ·", "glibc ${GLIBC} ·");
  testing::ExpectGolden("show_dlprobe.txt", text);
}

TEST(Tracer, ShowJsonIsTheProto3Mapping) {
  const auto dir = testing::ScratchDir("tracer_json");
  const auto trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibA}).code, 0);
  auto s = RunCmd({LDSCOPE_BIN, "show", "--format", "json", trace});
  ASSERT_EQ(s.code, 0) << s.err;
  v1::Timeline parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(s.out, &parsed).ok()) << s.out;
  const auto direct = testing::TimelineOf({trace});
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, direct));
  // The same bytes every time, the environment's names in order (a map's order was
  // protobuf's, changing from run to run).
  ASSERT_GT(direct.processes(0).env_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(RunCmd({LDSCOPE_BIN, "show", "--format", "json", trace}).out, s.out);
  const size_t env = s.out.find("\"env\": {");
  ASSERT_NE(env, std::string::npos);
  std::vector<std::string> names;
  for (size_t at = env + 8; s.out.compare(s.out.find_first_not_of(" \n", at), 1, "}") != 0;) {
    const size_t q = s.out.find('"', at);
    names.push_back(s.out.substr(q + 1, s.out.find('"', q + 1) - q - 1));
    at = s.out.find('\n', q);
  }
  EXPECT_EQ(static_cast<int>(names.size()), direct.processes(0).env_size());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << s.out.substr(env, 400);
}

// `ld.so PROGRAM` (some wrappers start programs so): /proc/self/exe is ld.so, but the
// executable is the program and ld.so is still the interpreter.
TEST(Tracer, LdsoRunAsAProgram) {
  const auto dir = testing::ScratchDir("tracer_ldso");
  const auto trace = dir + "/t.ldscope";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", "/lib64/ld-linux-x86-64.so.2",
                   DLPROBE, "open", kLibB});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "no findings, no notes";
  const auto t = testing::TimelineOf({trace});
  ASSERT_EQ(t.processes_size(), 1);
  const auto lines = testing::LoadLines(t.processes(0));
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0], std::string("LOAD_EXECUTABLE  -> ") + DLPROBE + " [0]");
  EXPECT_EQ(lines[1].rfind("LOAD_INTERPRETER  -> ", 0), 0u) << lines[1];
  EXPECT_EQ(lines.back(), "LOAD_DLOPEN " + kLibB + " -> " + kLibB + " [0]");
}

TEST(Tracer, RunPassesExitStatusAndKeepsStdoutClean) {
  const auto dir = testing::ScratchDir("tracer_status");
  auto r = RunCmd({LDSCOPE_BIN, "run", "-o", dir + "/a.ldscope", "--", "/bin/sh", "-c",
                "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err.rfind("err\n", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("ldscope: /bin/sh: exit status 3; trace "), std::string::npos) << r.err;

  auto k = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", dir + "/b.ldscope", "--", "/bin/sh", "-c",
                "kill -TERM $$"});
  EXPECT_EQ(k.code, 128 + 15);
  auto n = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", dir + "/c.ldscope", "--", "/no/such/program"});
  EXPECT_EQ(n.code, 127);
  EXPECT_NE(n.err.find("cannot run /no/such/program: No such file or directory"), std::string::npos);
  auto u = RunCmd({LDSCOPE_BIN, "run"});
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.err.find("no command given"), std::string::npos) << u.err;
  u = RunCmd({LDSCOPE_BIN, "run", "-q", "--", "-o", dir + "/d.ldscope"});
  EXPECT_EQ(u.code, 127) << "everything after a leading -- is the command";
  // Without ldscope's own --, the command starts at its first word; a later -- is its.
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {LDSCOPE_BIN, "run", "-q", "-o", dir + "/e.ldscope", "/bin/echo", "a", "--", "b", "-o", "x"},
           {LDSCOPE_BIN, "run", "-q", "-o", dir + "/e.ldscope", "--", "/bin/echo", "a", "--", "b", "-o", "x"}}) {
    const auto e = RunCmd(argv);
    EXPECT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(e.out, "a -- b -o x\n");
  }
}

// Without any collector: LDSCOPE_DIR makes one trace file per process image.
TEST(Tracer, LdscopeDirWritesOneFilePerProcess) {
  const auto dir = testing::ScratchDir("tracer_dir");
  auto r = RunCmd({DLPROBE, "open", kLibA, "fork", "open", kLibB},
               {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_DIR=" + dir});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = testing::TimelineOf({dir});
  testing::ExpectOpenForkOpen(r, t, kLibA, kLibB);
  auto s = RunCmd({LDSCOPE_BIN, "show", dir});
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("forked from pid"), std::string::npos);
}

}  // namespace
}  // namespace ldscope
