// The diagnosis, end to end: each fixture scenario run under `ldscope run` with the
// machine's real python3 (or dlprobe), the text and JSON reports compared whole with
// golden files; --fail-on statuses; no false alarms on a broad set of real imports.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "analysis/analysis.h"
#include "analysis/registry.h"
#include "support/canonical.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kFx = FIXTURES;
const std::string kScenarios = SCENARIOS_DIR;

struct Scenario {
  std::string name;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  int code = 0;  // the command's own exit status (ldscope run passes it on)
};

std::vector<Scenario> Scenarios() {
  auto py = [](const std::string& script) {
    return std::vector<std::string>{"/usr/bin/python3", kScenarios + "/" + script, kFx};
  };
  return {
      {"cupy_then_torch", py("cupy_then_torch.py"), {}},
      {"torch_then_cupy", py("torch_then_cupy.py"), {}},
      {"cupy_then_torch_preload", py("cupy_then_torch_preload.py"), {}},
      {"nvjitlink_ld_library_path", py("nvjitlink_ld_library_path.py"),
       {"LD_LIBRARY_PATH=" + kFx + "/cuda-12.1/lib64"}},
      {"version_not_met", py("version_not_met.py"), {"LD_LIBRARY_PATH=" + kFx + "/ver/old"}},
      {"optional_library_missing", {DLPROBE, "open", kFx + "/lib/libfix_orphan.so"}, {}},
      {"two_namespaces",
       {DLPROBE, "open", kFx + "/lib/libfix_a.so", "mopen", kFx + "/lib/libfix_a.so"},
       {}},
      // ld.so cannot find a NEEDED at start-up and exits 127 before main.
      {"startup_missing_library", {kFx + "/bin/needs_gone"}, {}, 127},
      // A child that dlopens and forks; its child binds lazily to the inherited libc.
      {"fork_of_fork",
       {DLPROBE, "forkchild", "open", kFx + "/lib/libfix_a.so", "forkchild", "lazy",
        kFx + "/lib/libfix_libc.so"},
       {}},
      {"python_fork_of_fork", {"/usr/bin/python3", kScenarios + "/fork_of_fork.py"}, {}},
      // Only the later of two LD_LIBRARY_PATH copies defines what is needed.
      {"later_on_path", {DLPROBE, "open", kFx + "/mpi/app/libmpiuser.so"},
       {"LD_LIBRARY_PATH=" + kFx + "/mpi/v4:" + kFx + "/mpi/v5"}},
      // Relative names, after a chdir: "./x.so", and a relative LD_LIBRARY_PATH entry.
      {"relative_name", {DLPROBE, "cd", kFx + "/lib", "open", "./libfix_bad.so"}, {}},
      {"relative_ld_library_path", {DLPROBE, "cd", kFx, "open", "libfix_bad.so"},
       {"LD_LIBRARY_PATH=lib"}},
  };
}


class ReportGolden : public ::testing::TestWithParam<Scenario> {};

TEST_P(ReportGolden, TextAndJson) {
  const Scenario& sc = GetParam();
  const auto dir = testing::ScratchDir("report_" + sc.name);
  const std::string trace = dir + "/t.ldscope";
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", trace, "--report",
                                  dir + "/report.txt", "--"};
  cmd.insert(cmd.end(), sc.argv.begin(), sc.argv.end());
  const auto r = RunCmd(cmd, sc.env);
  ASSERT_EQ(r.code, sc.code) << r.err;
  // With --report the diagnosis goes to the file: stderr is the command's own (ld.so's
  // message when it cannot start).
  const std::string text = "== the command printed\n" + r.out +
                           (r.err.empty() ? "" : "== on stderr\n" + r.err) +
                           "== ldscope's diagnosis\n" + testing::ReadFile(dir + "/report.txt");
  testing::ExpectGolden("report_" + sc.name + ".txt", text);
  const auto j = RunCmd({LDSCOPE_BIN, "report", "--format", "json", trace}, sc.env);
  ASSERT_EQ(j.code, 0) << j.err;
  testing::ExpectGolden("report_" + sc.name + ".json", j.out);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ReportGolden, ::testing::ValuesIn(Scenarios()),
                         [](const auto& info) { return info.param.name; });

TEST(Report, FailOnStatuses) {
  const auto dir = testing::ScratchDir("report_fail_on");
  const auto sc = Scenarios();
  // run: the diagnosis on stderr after the command, status 3 when --fail-on matches.
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", dir + "/a.ldscope", "--fail-on",
                   "missing-symbol", "--", sc[0].argv[0], sc[0].argv[1], sc[0].argv[2]});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("error[missing-symbol]: "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("undefined symbol: ncclCommRegister"), std::string::npos) << r.out;
  // Without --fail-on, run keeps the command's status.
  auto plain = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", dir + "/b.ldscope", "--", sc[0].argv[0],
                       sc[0].argv[1], sc[0].argv[2]});
  EXPECT_EQ(plain.code, 0);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", "--fail-on", "duplicate-library", dir + "/a.ldscope"}).code, 0);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", "--fail-on", "error", dir + "/a.ldscope"}).code, 3);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", "--fail-on", "warning,any", dir + "/a.ldscope"}).code, 3);
  auto bad = RunCmd({LDSCOPE_BIN, "report", "--fail-on", "nonsense", dir + "/a.ldscope"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown kind 'nonsense'"), std::string::npos) << bad.err;
  // A clean run says nothing extra with -q.
  auto clean = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", dir + "/c.ldscope", "--fail-on", "any", "--",
                       "/bin/true"});
  EXPECT_EQ(clean.code, 0);
  EXPECT_EQ(clean.err, "");
}

// Colour: --color=always colours each severity and bold-faces each headline (golden,
// escapes and all); auto colours on a terminal (script(1) gives the command one) unless
// NO_COLOR is set, and never in a pipe or a file. A clean run says "no findings".
TEST(Report, ColourAndNoFindings) {
  const auto dir = testing::ScratchDir("report_colour");
  const auto sc = Scenarios();
  const std::string trace = dir + "/a.ldscope";
  ASSERT_EQ(
      RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", sc[0].argv[0], sc[0].argv[1], sc[0].argv[2]})
          .code,
      0);
  const auto always = RunCmd({LDSCOPE_BIN, "report", "--color=always", trace});
  ASSERT_EQ(always.code, 0) << always.err;
  testing::ExpectGolden("report_colour.txt", always.out);
  const auto piped = RunCmd({LDSCOPE_BIN, "report", trace});
  EXPECT_EQ(piped.out.find('\033'), std::string::npos);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", "--color=always", "-o", dir + "/r.txt", trace}).code, 0);
  EXPECT_EQ(testing::ReadFile(dir + "/r.txt"), piped.out);
  // script(1) runs its command with $SHELL -c on a new terminal (and needs a stdin).
  const std::vector<std::string> on_tty = {"/bin/sh", "-c", "exec script -qec \"$0\" /dev/null </dev/null",
                                           "'" LDSCOPE_BIN "' report '" + trace + "'"};
  const auto tty = RunCmd(on_tty, {"TERM=xterm", "SHELL=/bin/sh"}, {"NO_COLOR"});
  EXPECT_NE(tty.out.find("\033[1;31merror\033[0m[missing-symbol]: \033[1m"), std::string::npos) << tty.out << tty.err;
  const auto no_color = RunCmd(on_tty, {"TERM=xterm", "SHELL=/bin/sh", "NO_COLOR=1"});
  EXPECT_EQ(no_color.out.find('\033'), std::string::npos) << no_color.out;
  EXPECT_NE(no_color.out.find("error[missing-symbol]: "), std::string::npos) << no_color.out;
  const auto clean = RunCmd({LDSCOPE_BIN, "run", "-o", dir + "/c.ldscope", "--", "/bin/true"});
  EXPECT_EQ(clean.code, 0);
  EXPECT_NE(clean.err.find("\nno findings\n"), std::string::npos) << clean.err;
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", "--color=sometimes", trace}).code, 2);
}

// --perf: the report on stdout as without it, and on stderr a row for each phase and for
// every pass of the registry, in the order they run, with how often each ran (the times
// are not compared); over several hosts the pass across hosts runs too.
TEST(Report, PerfListsEveryPhaseAndPass) {
  const auto dir = testing::ScratchDir("report_perf");
  const auto sc = Scenarios();
  const std::string trace = dir + "/a.ldscope";
  ASSERT_EQ(
      RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", sc[0].argv[0], sc[0].argv[1], sc[0].argv[2]})
          .code,
      0);
  // The rows' phases and counts, one "PHASE COUNT" line each, after the header.
  const auto rows = [](const std::string& table) {
    std::istringstream in(table);
    std::string line, header, out;
    std::getline(in, header);
    EXPECT_TRUE(std::regex_match(header, std::regex(R"(phase +wall ms +CPU ms +count)"))) << table;
    const std::regex row(R"((.*[^ ]) +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +([0-9]+))");
    while (std::getline(in, line)) {
      std::smatch m;
      EXPECT_TRUE(std::regex_match(line, m, row)) << line;
      out += m[1].str() + " " + m[2].str() + "\n";
    }
    return out;
  };
  // Every pass ran once, but the one over several hosts' contexts.
  std::string expected = "read 1\nfacts 1\nmodel 1\nfiles 1\n";
  for (const auto& p : analysis::Passes()) expected += analysis::PassPhase(p) + (p.run != nullptr ? " 1\n" : " 0\n");
  expected += "notes 1\nrender 1\n";
  const auto plain = RunCmd({LDSCOPE_BIN, "report", trace});
  const auto perf = RunCmd({LDSCOPE_BIN, "report", "--perf", trace});
  ASSERT_EQ(perf.code, 0) << perf.err;
  EXPECT_EQ(perf.out, plain.out);
  EXPECT_EQ(rows(perf.err), expected);
  EXPECT_EQ(plain.err, "");
  // Two hosts of one trace each: each host read, modelled and analysed, the fleet pass
  // fed by each host (its Add) and run once at the end (its Find).
  const std::string b = dir + "/b.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", b, "--", "/bin/true"}, {"LDSCOPE_HOST=host-b"}).code,
            0);
  const auto hosts = RunCmd({LDSCOPE_BIN, "report", "--perf", trace, b});
  ASSERT_EQ(hosts.code, 0) << hosts.err;
  EXPECT_NE(rows(hosts.err).find("read 2\nfacts 2\nmodel 2\nfiles 2\n"), std::string::npos) << hosts.err;
  EXPECT_NE(rows(hosts.err).find("pass fleet 3\n"), std::string::npos) << hosts.err;
}

// Progress: on a terminal, a report over many traces counts the files read, then says
// it is analysing, and erases the line before the report; over several hosts it counts
// the hosts; in a pipe, nothing of it.
TEST(Report, ProgressOnATerminalOnly) {
  const auto dir = testing::ScratchDir("report_progress");
  const auto sc = Scenarios();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/t" + std::to_string(i) + ".ldscope", "--",
                      sc[0].argv[0], sc[0].argv[1], sc[0].argv[2]})
                  .code,
              0);
  const auto piped = RunCmd({LDSCOPE_BIN, "report", "--color=never", dir});
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(piped.err, "");
  const std::vector<std::string> on_tty = {"/bin/sh", "-c", "exec script -qec \"$0\" /dev/null </dev/null",
                                           "'" LDSCOPE_BIN "' report --color=never '" + dir + "'"};
  const auto tty = RunCmd(on_tty, {"TERM=xterm", "SHELL=/bin/sh"});
  ASSERT_EQ(tty.code, 0) << tty.out << tty.err;
  // The first count and the last are always shown (those between at most every 50 ms),
  // each over the one before, then erased with spaces.
  const std::string first = "\rreport: 1 of 3 trace files read", last = "\rreport: 3 of 3 trace files read";
  const size_t width = last.size() - 1;
  const std::string analysing =
      "\rreport: analysing" + std::string(width - 17, ' ') + "\r" + std::string(width, ' ') + "\r";
  const size_t a = tty.out.find(first), b = tty.out.find(last), c = tty.out.find(analysing);
  ASSERT_EQ(a, 0u) << tty.out;
  EXPECT_LT(a, b);
  ASSERT_NE(c, std::string::npos) << tty.out;
  EXPECT_LT(b, c);
  // Then the report, as in a pipe (the terminal ends its lines with \r\n).
  EXPECT_EQ(testing::ReplaceAll(tty.out.substr(c + analysing.size()), "\r\n", "\n"), piped.out);
  // TERM=dumb cannot erase a line: no progress.
  const auto dumb = RunCmd(on_tty, {"TERM=dumb", "SHELL=/bin/sh"});
  EXPECT_EQ(testing::ReplaceAll(dumb.out, "\r\n", "\n"), piped.out);

  // Traces of two hosts: the hosts analysed so far, erased before the report.
  for (const std::string host : {"node-a", "node-b"})
    ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/" + host + ".ldscope", "--", "/bin/true"},
                     {"LDSCOPE_HOST=" + host})
                  .code,
              0);
  const std::string node_a = dir + "/node-a.ldscope", node_b = dir + "/node-b.ldscope";
  const auto hosts_piped = RunCmd({LDSCOPE_BIN, "report", "--color=never", node_a, node_b});
  ASSERT_EQ(hosts_piped.code, 0) << hosts_piped.err;
  EXPECT_EQ(hosts_piped.err, "");
  const auto hosts = RunCmd({"/bin/sh", "-c", "exec script -qec \"$0\" /dev/null </dev/null",
                             "'" LDSCOPE_BIN "' report --color=never '" + node_a + "' '" + node_b + "'"},
                            {"TERM=xterm", "SHELL=/bin/sh"});
  const std::string counted = "\rreport: 0 of 2 hosts analysed";
  const std::string erased = "\r" + std::string(counted.size() - 1, ' ') + "\r";
  ASSERT_EQ(hosts.out.find(counted), 0u) << hosts.out;
  const size_t end = hosts.out.find(erased);
  ASSERT_NE(end, std::string::npos) << hosts.out;
  EXPECT_EQ(testing::ReplaceAll(hosts.out.substr(end + erased.size()), "\r\n", "\n"), hosts_piped.out);
}

// A file that cannot be read when the report is made (removed since the trace, or the
// trace is read on another machine) and that the trace has no facts of (--no-facts):
// the report says what it could not read and what that leaves unknown, and asserts
// nothing about the symbols in it.
TEST(Report, UnreadableFileLeavesUnknown) {
  const auto dir = testing::ScratchDir("report_unreadable");
  for (const char* lib : {"libfix_a.so", "libfix_b.so"})
    std::filesystem::copy_file(kFx + "/lib/" + lib, dir + "/" + lib,
                               std::filesystem::copy_options::overwrite_existing);
  const std::string trace = dir + "/t.ldscope";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "--no-facts", "-o", trace, "--",
                         DLPROBE, "lazy", dir + "/libfix_a.so"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::filesystem::remove(dir + "/libfix_b.so");
  const auto text = RunCmd({LDSCOPE_BIN, "report", trace});
  ASSERT_EQ(text.code, 0) << text.err;
  testing::ExpectGolden("report_unreadable.txt", text.out);
  const auto j = RunCmd({LDSCOPE_BIN, "report", "--format", "json", trace});
  ASSERT_EQ(j.code, 0) << j.err;
  testing::ExpectGolden("report_unreadable.json", j.out);
}

// A failing load traced with copies of the fixture libraries (a library bound through
// LD_LIBRARY_PATH lacks a symbol the dlopened one needs), reported, then reported again
// after the copies are deleted: the ELF facts `run` wrote into the trace give the same
// report, byte for byte.
struct MpiCopies {
  std::string dir, trace;
  explicit MpiCopies(const std::string& name) : dir(testing::ScratchDir(name)), trace(dir + "/t.ldscope") {
    std::filesystem::create_directories(dir + "/app");
    std::filesystem::create_directories(dir + "/v4");
    std::filesystem::copy_file(kFx + "/mpi/app/libmpiuser.so", dir + "/app/libmpiuser.so");
    std::filesystem::copy_file(kFx + "/mpi/v4/libmpi.so.40", dir + "/v4/libmpi.so.40");
  }
  testing::Proc Run(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    cmd.insert(cmd.end(), {"--", DLPROBE, "open", dir + "/app/libmpiuser.so"});
    return RunCmd(cmd, {"LD_LIBRARY_PATH=" + dir + "/v4"});
  }
  std::string Report(const std::string& format) const {
    const auto r = RunCmd({LDSCOPE_BIN, "report", "--format", format, trace});
    EXPECT_EQ(r.code, 0) << r.err;
    return testing::Canonicalise(r.out);
  }
};

TEST(Report, FactsInTheTraceOutliveTheFiles) {
  const MpiCopies m("report_facts_deleted");
  ASSERT_EQ(m.Run().code, 0);
  const std::string text = m.Report("text"), json = m.Report("json");
  std::filesystem::remove(m.dir + "/app/libmpiuser.so");
  std::filesystem::remove(m.dir + "/v4/libmpi.so.40");
  EXPECT_EQ(m.Report("text"), text);
  EXPECT_EQ(m.Report("json"), json);
  testing::ExpectGolden("report_facts_deleted.txt", m.Report("text"));
  testing::ExpectGolden("report_facts_deleted.json", m.Report("json"));
}

// `collect` adds the same facts when it stops: the same report after the deletion.
TEST(Report, CollectAddsTheFactsToo) {
  MpiCopies m("report_facts_collect");
  testing::Collector c(m.dir);
  m.trace = c.trace;
  std::vector<std::string> env = c.Env();
  env.push_back("LD_LIBRARY_PATH=" + m.dir + "/v4");
  const auto r = RunCmd({DLPROBE, "open", m.dir + "/app/libmpiuser.so"}, env);
  ASSERT_EQ(r.code, 0) << r.err;
  c.Stop();
  std::filesystem::remove(m.dir + "/app/libmpiuser.so");
  std::filesystem::remove(m.dir + "/v4/libmpi.so.40");
  testing::ExpectGolden("report_facts_deleted.txt", m.Report("text"));
}

// The library bound is replaced by another build (one that defines the symbol) after
// the trace: the report is about the traced file, from the trace's facts, and says so.
TEST(Report, FactsInTheTraceStandInForAChangedFile) {
  const MpiCopies m("report_facts_changed");
  ASSERT_EQ(m.Run().code, 0);
  std::filesystem::copy_file(kFx + "/mpi/v5/libmpi.so.40", m.dir + "/v4/libmpi.so.40",
                             std::filesystem::copy_options::overwrite_existing);
  testing::ExpectGolden("report_facts_changed.txt", m.Report("text"));
  testing::ExpectGolden("report_facts_changed.json", m.Report("json"));
}

// Without facts (--no-facts), a library replaced by another build after the trace is
// read as it is now, and the report says so once per file, however many times the
// traced program loaded it (here three dlopen/dlclose cycles).
TEST(Report, AChangedFileWithoutFactsIsNotedOncePerFile) {
  const MpiCopies m("report_no_facts_changed");
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "--no-facts", "-o", m.trace, "--", DLPROBE,
                         "cycles", "3", m.dir + "/v4/libmpi.so.40"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::filesystem::copy_file(kFx + "/mpi/v5/libmpi.so.40", m.dir + "/v4/libmpi.so.40",
                             std::filesystem::copy_options::overwrite_existing);
  testing::ExpectGolden("report_no_facts_changed.txt", m.Report("text"));
}

// Without facts (--no-facts) the same deletion leaves the symbols unknown: the report
// says which files it could not read instead of naming a missing symbol.
TEST(Report, NoFactsLeavesDeletedFilesUnknown) {
  const MpiCopies m("report_no_facts_deleted");
  ASSERT_EQ(m.Run({"--no-facts"}).code, 0);
  std::filesystem::remove(m.dir + "/app/libmpiuser.so");
  std::filesystem::remove(m.dir + "/v4/libmpi.so.40");
  testing::ExpectGolden("report_no_facts_deleted.txt", m.Report("text"));
}

// The library the program loaded (a build that defines what libmpiuser needs) is replaced
// on disk by another build (one that lacks it) after the load and before the collector
// took its facts (the collector stopped meanwhile, as a busy one may be): the facts would
// describe the replacement. They are not taken from it: the trace says the file changed
// before its facts were taken, and a report where the files are gone says what it could
// not read instead of a missing symbol the loaded file did define.
TEST(Report, AFileReplacedBeforeItsFactsGivesNoFalseFinding) {
  const auto dir = testing::ScratchDir("report_facts_replaced");
  std::filesystem::create_directories(dir + "/app");
  std::filesystem::create_directories(dir + "/lib");
  std::filesystem::copy_file(kFx + "/mpi/app/libmpiuser.so", dir + "/app/libmpiuser.so");
  std::filesystem::copy_file(kFx + "/mpi/v5/libmpi.so.40", dir + "/lib/libmpi.so.40");
  testing::Collector c(dir);
  ASSERT_TRUE(std::filesystem::exists(c.socket));
  kill(c.pid, SIGSTOP);
  std::vector<std::string> env = c.Env();
  env.push_back("LD_LIBRARY_PATH=" + dir + "/lib");
  const auto r = RunCmd({DLPROBE, "open", dir + "/app/libmpiuser.so"}, env);
  // A rebuild: the new file renamed over the old one.
  std::filesystem::copy_file(kFx + "/mpi/v4/libmpi.so.40", dir + "/lib/new.so");
  std::filesystem::rename(dir + "/lib/new.so", dir + "/lib/libmpi.so.40");
  kill(c.pid, SIGCONT);
  c.Stop();
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out, "open " + dir + "/app/libmpiuser.so: ok\n");
  std::filesystem::remove_all(dir + "/app");
  std::filesystem::remove_all(dir + "/lib");
  const auto text = RunCmd({LDSCOPE_BIN, "report", c.trace});
  EXPECT_EQ(text.code, 0) << text.err;
  testing::ExpectGolden("report_facts_replaced.txt", text.out);
}

// Libraries reached through relative LD_LIBRARY_PATH entries (resolved in the working
// directory the program had then): their facts are in the trace, so the report made
// after the files are gone is the report made while they were there.
TEST(Report, FactsOfRelativelyFoundLibraries) {
  const MpiCopies m("report_facts_relative");
  const auto r = RunCmd(
      {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", m.trace, "--", DLPROBE, "cd", m.dir, "open", "libmpiuser.so"},
      {"LD_LIBRARY_PATH=app:v4"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string text = m.Report("text");
  EXPECT_NE(text.find("libmpiuser.so"), std::string::npos) << text;
  std::filesystem::remove(m.dir + "/app/libmpiuser.so");
  std::filesystem::remove(m.dir + "/v4/libmpi.so.40");
  EXPECT_EQ(m.Report("text"), text);
  testing::ExpectGolden("report_facts_relative.txt", m.Report("text"));
}

// The machine's real python3 importing a broad set of standard and Debian-packaged
// extension modules: no warning or error findings.
TEST(Report, NoFalseAlarmsOnRealPython) {
  const auto dir = testing::ScratchDir("report_no_false_alarms");
  const std::string modules =
      "import numpy, numpy.linalg, numpy.fft, numpy.random, decimal, json, ssl, sqlite3, ctypes, "
      "ctypes.util, hashlib, zlib, bz2, lzma, socket, select, array, math, uuid, csv, "
      "xml.etree.ElementTree, pyexpat, curses, readline, dbm, multiprocessing, asyncio, "
      "unicodedata, mmap, fcntl, termios, resource, grp, binascii, struct, cmath, _sha3; "
      "ctypes.CDLL(ctypes.util.find_library('m')); ctypes.CDLL(ctypes.util.find_library('z'))";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", dir + "/t.ldscope", "--fail-on", "warning",
                         "--", "/usr/bin/python3", "-c", modules});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "no findings, no notes";
  const auto t = testing::TimelineOf({dir + "/t.ldscope"});
  ASSERT_EQ(t.processes_size(), 1);
  EXPECT_GE(testing::LoadLines(t.processes(0)).size(), 30u) << "a broad workload";
  const v1::Report rep = analysis::Analyze(t);
  for (const auto& f : rep.findings()) ADD_FAILURE() << f.message();
}

}  // namespace
}  // namespace ldscope

namespace ldscope {
namespace {

// A dlopen of a file already loaded, by another spelling of its path (Python packages do
// this: torch's ctypes.CDLL of nvidia/cu13/lib/libcudart.so.13, which torch/lib/../../
// already mapped): glibc finds the same file and maps nothing. Reported where the files
// are gone (another machine), that is still not a "not found".
TEST(Report, AReopenByAnotherSpellingIsNotAFailureWhereTheFilesAreGone) {
  const std::string dir = testing::ScratchDir("report_reopen_spelling");
  std::filesystem::create_directories(dir + "/sub");
  for (const char* f : {"libfix_a.so", "libfix_b.so"})
    std::filesystem::copy_file(kFx + "/lib/" + f, dir + "/" + f);
  const std::string trace = dir + "/t.ldscope";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", DLPROBE, "open",
                         dir + "/libfix_a.so", "open", dir + "/sub/../libfix_b.so"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto report = [&] {
    const auto p = RunCmd({LDSCOPE_BIN, "report", trace});
    EXPECT_EQ(p.code, 0) << p.err;
    return testing::Canonicalise(p.out);
  };
  const std::string before = report();
  std::filesystem::remove_all(dir + "/sub");
  std::filesystem::remove(dir + "/libfix_a.so");
  std::filesystem::remove(dir + "/libfix_b.so");
  EXPECT_EQ(report(), before);
  testing::ExpectGolden("report_reopen_spelling.txt", report());
}

}  // namespace
}  // namespace ldscope

namespace ldscope {
namespace {

// --fail-on takes one (comma-separated) value: the inputs after it are inputs (with two
// or more, the second was taken as another kind: "unknown kind", exit 2).
TEST(Report, FailOnBeforeTheInputs) {
  const MpiCopies m("report_fail_on_first");
  ASSERT_EQ(m.Run().code, 0);
  const auto r = RunCmd({LDSCOPE_BIN, "report", "--format", "json", "--fail-on", "error", m.dir + "/"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(testing::Canonicalise(r.out), m.Report("json"));
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", "--fail-on", "error,warning", m.dir + "/"}).code, 3);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", "--fail-on", "error", m.trace}).code, 3);
  const auto two = RunCmd({LDSCOPE_BIN, "report", "--fail-on", "error", m.trace, m.trace});
  EXPECT_EQ(two.code, 3) << two.err;
}

}  // namespace
}  // namespace ldscope
