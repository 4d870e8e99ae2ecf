// Trust in what ldscope writes and reads: every write checked (full disks, size
// limits), no trace read back from a stream, no existing file destroyed or exposed,
// no input (devices, FIFOs, huge or random files) that crashes or hangs it.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::ReadFile;
using testing::RunCmd;
using testing::ScratchDir;
using testing::WriteFile;

const std::string kLdscope = LDSCOPE_BIN;

// A shell script with $L = ldscope, $P = dlprobe, $F = the fixtures.
testing::Proc Sh(const std::string& script, int timeout_s = 60) {
  return RunCmd({"/bin/sh", "-c", script},
                {"L=" + kLdscope, "P=" DLPROBE, "F=" FIXTURES}, {}, timeout_s);
}

// The run summary's counts, which other work changes, as "(...)"; event counts as N.
std::string Normalise(const std::string& err) {
  std::string s = std::regex_replace(err, std::regex(R"(\([0-9]+ process(es)?[ ,][^\n]*\))"), "(...)");
  return std::regex_replace(s, std::regex(R"([0-9]+ of [0-9]+ events)"), "K of N events");
}

// A small trace of /bin/true in dir.
std::string TrueTrace(const std::string& dir) {
  const std::string t = dir + "/true.ldscope";
  EXPECT_EQ(RunCmd({kLdscope, "run", "-q", "-o", t, "--", "/bin/true"}).code, 0);
  return t;
}

TEST(Output, FullDeviceGivesItsErrnoAndStatus4) {
  const auto r = RunCmd({kLdscope, "run", "-o", "/dev/full", "--", "/bin/true"});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(Normalise(r.err),
            "ldscope: cannot write /dev/full: No space left on device (the command runs, "
            "unrecorded on disk)\n"
            "ldscope: writing /dev/full failed after 0 bytes: No space left on device; the trace "
            "is incomplete: K of N events written\n"
            "ldscope: /bin/true: exit status 0; trace /dev/full (...)\n"
            "no findings\n");
}

// A file-size limit (SIGXFSZ ignored) fails writes part-way, as a filling disk does:
// ldscope says so and exits 4, and the file is cut at its last whole record.
TEST(Output, WriteFailurePartWayIsReportedAndTheFileStaysReadable) {
  const std::string dir = ScratchDir("output_fsize");
  const std::string t = dir + "/t.ldscope";
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 3000;
  struct sigaction ign {}, prev {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ign, &prev);
  setrlimit(RLIMIT_FSIZE, &small);
  const auto r = RunCmd({kLdscope, "run", "-q", "-o", t, "--", DLPROBE, "open",
                         FIXTURES "/lib/libfix_a.so", "open", FIXTURES "/lib/libfix_b.so"});
  setrlimit(RLIMIT_FSIZE, &old);
  sigaction(SIGXFSZ, &prev, nullptr);
  EXPECT_EQ(r.code, 4);
  const auto size = std::filesystem::file_size(t);
  EXPECT_LE(size, 3000u);
  EXPECT_EQ(std::regex_replace(Normalise(r.err), std::regex(t), "T"),
            "ldscope: writing T failed after " + std::to_string(size) +
                " bytes: File too large; the trace is incomplete: K of N events written\n"
                "ldscope: " DLPROBE ": exit status 0; trace T (...)\n");
  // What was written is a clean prefix: shown without complaint.
  const auto shown = RunCmd({kLdscope, "show", t});
  EXPECT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(shown.err, "");
}

TEST(Output, TraceToAPipeIsNeverReadBack) {
  const std::string dir = ScratchDir("output_pipe");
  const auto r = Sh("cd " + dir + " && \"$L\" run -q -o /dev/stdout -- /bin/true | cat > piped.ldscope", 30);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.code, 0) << r.err;
  const auto shown = RunCmd({kLdscope, "show", "--no-timestamps", dir + "/piped.ldscope"});
  EXPECT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(testing::ByExe(testing::TimelineOf({dir + "/piped.ldscope"}), "/true").size(), 1u);
}

// /dev/stdout redirected to a file: the trace goes into the file the shell opened (not a
// new file renamed over its name, which would leave the shell's descriptor on a deleted
// one), and the command's own output to standard error.
TEST(Output, DevStdoutIntoAFileIsWrittenInPlace) {
  const std::string dir = ScratchDir("output_devstdout");
  const auto r = Sh("cd " + dir + " && \"$L\" run -q -o /dev/stdout -- /bin/echo printed > out.ldscope", 30);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "printed\n");
  EXPECT_EQ(testing::ByExe(testing::TimelineOf({dir + "/out.ldscope"}), "/echo").size(), 1u);
  EXPECT_EQ(Sh("ls -A " + dir).out, "out.ldscope\n");
}

TEST(Output, DashMeansStandardOutput) {
  const std::string dir = ScratchDir("output_dash");
  const auto r = Sh("cd " + dir + " && \"$L\" run -q -o - -- /bin/true > out.ldscope", 30);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/-"));
  EXPECT_EQ(testing::ByExe(testing::TimelineOf({dir + "/out.ldscope"}), "/true").size(), 1u);
}

TEST(Output, ReportOntoTheTraceIsRefused) {
  const std::string dir = ScratchDir("output_same");
  const std::string x = dir + "/x";
  WriteFile(x, "precious");
  auto r = RunCmd({kLdscope, "run", "--report", x, "-o", dir + "/../output_same/x", "--", "/bin/true"});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: the outputs -o " + dir + "/../output_same/x and --report " + x + " are the same file\n");
  EXPECT_EQ(ReadFile(x), "precious");
  r = RunCmd({kLdscope, "run", "--junit", x, "-o", x, "--", "/bin/true"});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: the outputs -o " + x + " and --junit " + x + " are the same file\n");
  EXPECT_EQ(ReadFile(x), "precious");
  const std::string t = TrueTrace(dir);
  const std::string before = ReadFile(t);
  r = RunCmd({kLdscope, "report", t, "-o", t});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: the output -o " + t + " is the input " + t + ": refusing to overwrite it\n");
  r = RunCmd({kLdscope, "report", "--junit", t, t});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: the output --junit " + t + " is the input " + t + ": refusing to overwrite it\n");
  r = RunCmd({kLdscope, "export", "--chrome", t, "-o", t});
  EXPECT_EQ(r.code, 4);
  r = RunCmd({kLdscope, "export", "--otlp-traces", t, t});
  EXPECT_EQ(r.code, 4);
  r = RunCmd({kLdscope, "lock", t, "-o", t});
  EXPECT_EQ(r.code, 4);
  // The lock a run checks against, and the command it runs, are inputs too.
  const std::string lock = dir + "/l.lock";
  ASSERT_EQ(RunCmd({kLdscope, "lock", t, "-o", lock}).code, 0);
  const std::string locked = ReadFile(lock);
  r = RunCmd({kLdscope, "run", "--lock", lock, "-o", lock, "--", "/bin/true"});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: the output -o " + lock + " is the input " + lock + ": refusing to overwrite it\n");
  EXPECT_EQ(ReadFile(lock), locked);
  EXPECT_EQ(ReadFile(t), before);
  EXPECT_EQ(Sh("ls -A " + dir).out, "l.lock\ntrue.ldscope\nx\n") << "no file left behind";
}

TEST(Output, EveryWriterChecksItsWrites) {
  const std::string dir = ScratchDir("output_full");
  const std::string t = TrueTrace(dir);
  for (const char* format : {"text", "json"}) {
    const auto r = RunCmd({kLdscope, "report", "--format", format, t, "-o", "/dev/full"});
    EXPECT_EQ(r.code, 4) << format;
    EXPECT_EQ(r.err, "ldscope: the report: writing /dev/full failed: No space left on device\n");
  }
  auto r = RunCmd({kLdscope, "export", "--chrome", t, "-o", "/dev/full"});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: writing /dev/full failed: No space left on device\n");
  r = Sh("\"$L\" show " + t + " > /dev/full");
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: writing to standard output failed: No space left on device\n");
  r = Sh("\"$L\" report --format json " + t + " > /dev/full");
  EXPECT_EQ(r.code, 4);
}

TEST(Input, DevicesFifosAndHugeFilesAreRefusedNotRead) {
  const std::string dir = ScratchDir("input_special");
  auto r = RunCmd({kLdscope, "show", "/dev/zero"}, {}, {}, 30);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "ldscope: /dev/zero: not a regular file: not an ldscope trace\n"
                   "ldscope: no trace could be read\n");
  const std::string fifo = dir + "/fifo.ldscope";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  r = RunCmd({kLdscope, "report", fifo}, {}, {}, 30);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "ldscope: " + fifo + ": not a regular file: not an ldscope trace\n"
                   "ldscope: no trace could be read\n");
  // A sparse 64 GiB file: nothing is allocated for what it claims to hold.
  const std::string huge = dir + "/huge.ldscope";
  WriteFile(huge, "");
  std::filesystem::resize_file(huge, 64ull << 30);
  r = RunCmd({kLdscope, "show", huge}, {}, {}, 30);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "ldscope: " + huge + ": not an ldscope trace (no valid header)\n"
                   "ldscope: no trace could be read\n");
}

// Every reader takes "-" for standard input, and reads it as the file it came from;
// nothing of it is left behind in $TMPDIR.
TEST(Input, DashReadsStandardInput) {
  const std::string dir = ScratchDir("input_dash");
  const std::string t = TrueTrace(dir);
  const std::string tmp = dir + "/tmp";
  std::filesystem::create_directories(tmp);
  const std::vector<std::vector<std::string>> readers = {
      {"show", "--no-timestamps"}, {"report"}, {"report", "--format", "json"}, {"lock"}, {"diff", t}};
  for (const auto& reader : readers) {
    std::string from_file = "\"$L\"", from_stdin = "cat " + t + " | TMPDIR=" + tmp + " \"$L\"";
    for (const auto& a : reader) {
      from_file += " '" + a + "'";
      from_stdin += " '" + a + "'";
    }
    const auto a = Sh(from_file + " " + t);
    const auto b = Sh(from_stdin + " -");
    EXPECT_EQ(b.code, a.code) << reader[0] << ": " << b.err;
    EXPECT_EQ(b.out, a.out) << reader[0];
    EXPECT_TRUE(std::filesystem::is_empty(tmp)) << reader[0];
  }
  ASSERT_EQ(RunCmd({kLdscope, "lock", t, "-o", dir + "/t.lock"}).code, 0);
  const auto c = Sh("cat " + t + " | \"$L\" check --lock " + dir + "/t.lock -");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, "");
  const auto e = Sh("cat " + t + " | \"$L\" export --chrome -o " + dir + "/c.json - && test -s " + dir + "/c.json");
  EXPECT_EQ(e.code, 0) << e.err;
}

TEST(Input, EmptyAndRandomFilesAreNoTrace) {
  const std::string dir = ScratchDir("input_junk");
  WriteFile(dir + "/empty", "");
  std::string junk;
  uint32_t x = 12345;
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
  WriteFile(dir + "/random", junk);
  for (const char* cmd : {"show", "report"}) {
    auto r = RunCmd({kLdscope, cmd, dir + "/empty"});
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_EQ(r.err, "ldscope: " + dir + "/empty: empty file: not an ldscope trace\n"
                     "ldscope: no trace could be read\n");
    r = RunCmd({kLdscope, cmd, dir + "/random"});
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.err.find("ldscope: no trace could be read\n"), std::string::npos) << r.err;
  }
}

// A traced library's path that is now a FIFO is not opened for reading.
TEST(Input, LibraryReplacedByAFifoDoesNotHangTheAnalysis) {
  const std::string dir = ScratchDir("input_fifo_lib");
  std::filesystem::create_directories(dir + "/lib");
  const std::string lib = dir + "/lib/libfix_b.so";
  std::filesystem::copy_file(FIXTURES "/lib/libfix_b.so", lib);
  const std::string t = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({kLdscope, "run", "-q", "--no-report", "-o", t, "--", DLPROBE, "open", lib}).code, 0);
  std::filesystem::remove(lib);
  ASSERT_EQ(mkfifo(lib.c_str(), 0600), 0);
  auto r = RunCmd({kLdscope, "report", t}, {}, {}, 30);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.code, 0) << r.err;
  r = RunCmd({kLdscope, "export", "--chrome", t, "-o", dir + "/t.json"}, {}, {}, 30);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(Create, AFailedStartLeavesAnExistingTraceAlone) {
  const std::string dir = ScratchDir("create_failed_start");
  const std::string x = dir + "/x.ldscope";
  WriteFile(x, "earlier trace");
  // A $TMPDIR where the run directory cannot be made.
  const std::string tmp = dir + "/no-such-dir";
  auto r = RunCmd({kLdscope, "run", "-o", x, "--", "/bin/true"}, {"TMPDIR=" + tmp});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("ldscope: cannot create a private directory " + tmp + "/ldscope-", 0), 0u) << r.err;
  EXPECT_EQ(ReadFile(x), "earlier trace");
  // A command that cannot be run: no trace, the old one intact, no new file.
  r = RunCmd({kLdscope, "run", "-o", x, "--", dir + "/no-such-command"});
  EXPECT_EQ(r.code, 127);
  EXPECT_EQ(r.err, "ldscope: cannot run " + dir + "/no-such-command: No such file or directory; "
                   "no trace written\n");
  EXPECT_EQ(ReadFile(x), "earlier trace");
  r = RunCmd({kLdscope, "run", "-o", dir + "/new.ldscope", "--", dir + "/no-such-command"});
  EXPECT_EQ(r.code, 127);
  EXPECT_FALSE(std::filesystem::exists(dir + "/new.ldscope"));
}

TEST(Create, TracesArePrivate) {
  const std::string dir = ScratchDir("create_private");
  const auto r = Sh("umask 022; \"$L\" run -q -o " + dir + "/t.ldscope -- /bin/true");
  EXPECT_EQ(r.code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(stat((dir + "/t.ldscope").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Another user's symlink in a sticky directory is not followed (fs.protected_symlinks
// may be off, as it is in containers).
TEST(Create, SymlinkInASharedDirectoryIsNotFollowed) {
  ASSERT_EQ(geteuid(), 0u) << "this test makes a directory of another user: run the suite as root";
  const std::string dir = ScratchDir("create_symlink");
  const std::string target = dir + "/target";
  WriteFile(target, "root's file");
  const std::string shared = dir + "/shared";
  std::filesystem::create_directories(shared);
  ASSERT_EQ(chown(shared.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  const std::string link = shared + "/trace.ldscope";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), 65534, 65534), 0);
  const auto r = RunCmd({kLdscope, "run", "-o", link, "--", "/bin/true"});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: refusing to write " + link +
                       ": it is a symbolic link in a directory others can write to (link owned by "
                       "uid 65534, directory by uid 65534); remove it or choose another path\n");
  EXPECT_EQ(ReadFile(target), "root's file");
}

// Every file ldscope writes is 0600 whatever the umask: traces, reports, JUnit (which
// holds command lines), locks, exports, and a step summary it creates.
TEST(Create, EveryOutputIsPrivate) {
  const std::string dir = ScratchDir("create_private_all");
  const auto r = Sh("umask 022; cd " + dir +
                    " && \"$L\" run -q --report r.txt --junit j.xml -o t.ldscope -- /bin/true"
                    " && \"$L\" report t.ldscope --format json -o r.json --junit j2.xml"
                    " && \"$L\" lock t.ldscope -o l.lock && \"$L\" export --chrome t.ldscope -o c.json"
                    " && \"$L\" export --otlp o t.ldscope"
                    " && GITHUB_STEP_SUMMARY=s.md \"$L\" report --github t.ldscope > /dev/null");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"t.ldscope", "r.txt", "j.xml", "r.json", "j2.xml", "l.lock", "c.json", "o/traces.jsonl",
                           "o/logs.jsonl", "s.md"}) {
    struct stat st {};
    ASSERT_EQ(stat((dir + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
  }
}

// Another user's symlink in a sticky directory is refused by every writer, the JUnit
// report and the step summary included, with status 4; the file it names is unchanged.
TEST(Create, NoWriterFollowsAForeignSymlink) {
  ASSERT_EQ(geteuid(), 0u) << "this test makes a directory of another user: run the suite as root";
  const std::string dir = ScratchDir("create_symlink_all");
  const std::string t = TrueTrace(dir);
  const std::string target = dir + "/target";
  WriteFile(target, "root's file");
  ASSERT_EQ(chmod(target.c_str(), 0600), 0);
  const std::string shared = dir + "/shared";
  std::filesystem::create_directories(shared);
  ASSERT_EQ(chown(shared.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  const std::string link = shared + "/planted";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), 65534, 65534), 0);
  const std::string refusal = "refusing to write " + link +
                              ": it is a symbolic link in a directory others can write to (link "
                              "owned by uid 65534, directory by uid 65534); remove it or choose "
                              "another path\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{kLdscope, "report", "--junit", link, t}, "ldscope: the JUnit report: " + refusal},
      {{kLdscope, "run", "-q", "--junit", link, "-o", dir + "/o.ldscope", "--", "/bin/true"},
       "ldscope: the JUnit report: " + refusal},
      {{kLdscope, "run", "-q", "--report", link, "-o", dir + "/o.ldscope", "--", "/bin/true"},
       "ldscope: the report: " + refusal},
      {{kLdscope, "report", t, "-o", link}, "ldscope: the report: " + refusal},
      {{kLdscope, "lock", t, "-o", link}, "ldscope: the lock: " + refusal},
      {{kLdscope, "export", "--chrome", t, "-o", link}, "ldscope: " + refusal},
      {{kLdscope, "export", "--otlp-traces", link, t}, "ldscope: " + refusal},
  };
  for (const auto& [argv, err] : cases) {
    const auto r = RunCmd(argv);
    EXPECT_EQ(r.code, 4) << argv[1] << " " << argv[2];
    EXPECT_EQ(r.err, err) << argv[1] << " " << argv[2];
    EXPECT_EQ(ReadFile(target), "root's file");
  }
  const auto r = RunCmd({kLdscope, "report", "--github", t}, {"GITHUB_STEP_SUMMARY=" + link});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "ldscope: GITHUB_STEP_SUMMARY: " + refusal);
  EXPECT_EQ(ReadFile(target), "root's file");
  struct stat st {};
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A regular file is replaced by a new one renamed over it, never written into: another
// name of the old file keeps the old bytes, and nothing is left beside it. Our own link
// in our own directory is followed: the file it names is replaced, the link stays.
TEST(Create, AnExistingFileIsReplacedWhole) {
  const std::string dir = ScratchDir("create_replace");
  const std::string x = dir + "/x.ldscope";
  WriteFile(x, "old trace");
  ASSERT_EQ(link(x.c_str(), (dir + "/other-name").c_str()), 0);
  auto r = RunCmd({kLdscope, "run", "-q", "-o", x, "--", "/bin/true"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(dir + "/other-name"), "old trace");
  EXPECT_EQ(testing::ByExe(testing::TimelineOf({x}), "/true").size(), 1u);
  ASSERT_EQ(symlink("x.ldscope", (dir + "/current").c_str()), 0);
  r = RunCmd({kLdscope, "run", "-q", "-o", dir + "/current", "--", DLPROBE});
  ASSERT_EQ(r.code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(lstat((dir + "/current").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(testing::ByExe(testing::TimelineOf({x}), "/dlprobe").size(), 1u);
  // A step summary is appended to (its owner's contract), in place.
  const std::string summary = dir + "/summary.md";
  WriteFile(summary, "# earlier step\n");
  r = RunCmd({kLdscope, "report", "--github", x}, {"GITHUB_STEP_SUMMARY=" + summary});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(summary).rfind("# earlier step\n", 0), 0u);
  EXPECT_GT(ReadFile(summary).size(), 20u);
  EXPECT_EQ(Sh("ls -A " + dir).out, "current\nother-name\nsummary.md\nx.ldscope\n");
}

// With the trace on standard output, the command's own standard output goes to
// standard error: the trace stays whole.
TEST(Output, DashKeepsTheCommandsOutputApart) {
  const std::string dir = ScratchDir("output_dash_print");
  const auto r = Sh("cd " + dir + " && \"$L\" run -q -o - -- /bin/echo printed > out.ldscope", 30);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "printed\n");
  const auto shown = RunCmd({kLdscope, "show", dir + "/out.ldscope"});
  EXPECT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(shown.err, "");
  EXPECT_EQ(testing::ByExe(testing::TimelineOf({dir + "/out.ldscope"}), "/echo").size(), 1u);
}

// Values of arguments named like secrets reach no output; other arguments do, and
// --keep-argv keeps them all.
TEST(Secrets, ArgumentsNamedSecretAreRedactedEverywhere) {
  const std::string dir = ScratchDir("secrets_argv");
  const std::vector<std::string> command = {
      "/bin/sh",           "-c", "exit 0", "sh", "--password=hunter2", "--api-key", "xyzzy", "DB_TOKEN=plugh",
      "--config=keep.yaml"};
  std::vector<std::string> argv = {kLdscope,   "run",           "-q",       "--github", "--junit", dir + "/j.xml",
                                   "--report", dir + "/r.json", "--format", "json",     "-o",      dir + "/t.ldscope",
                                   "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  auto r = RunCmd(argv, {"GITHUB_STEP_SUMMARY=" + dir + "/s.md"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string t = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({kLdscope, "export", "--chrome", t, "-o", dir + "/c.json"}).code, 0);
  ASSERT_EQ(RunCmd({kLdscope, "export", "--otlp", dir + "/o", t}).code, 0);
  const auto shown = RunCmd({kLdscope, "show", t});
  const auto json = RunCmd({kLdscope, "show", "--format", "json", t});
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"trace", ReadFile(t)},
      {"junit", ReadFile(dir + "/j.xml")},
      {"report", ReadFile(dir + "/r.json")},
      {"summary", ReadFile(dir + "/s.md")},
      {"chrome", ReadFile(dir + "/c.json")},
      {"otlp", ReadFile(dir + "/o/traces.jsonl") + ReadFile(dir + "/o/logs.jsonl")},
      {"show", shown.out},
      {"show json", json.out},
      {"run's messages", r.out + r.err}};
  for (const auto& [what, text] : outputs)
    for (const char* secret : {"hunter2", "xyzzy", "plugh"})
      EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in " << what;
  EXPECT_NE(shown.out.find("  argv: /bin/sh -c 'exit 0' sh '--password=<redacted>' --api-key "
                           "'<redacted>' 'DB_TOKEN=<redacted>' --config=keep.yaml\n"),
            std::string::npos)
      << shown.out;
  EXPECT_EQ(ReadFile(dir + "/s.md")
                .rfind("### ldscope: /bin/sh -c exit 0 sh --password=&lt;redacted&gt; "
                       "--api-key &lt;redacted&gt; DB\\_TOKEN=&lt;redacted&gt; "
                       "--config=keep.yaml\n",
                       0),
            0u);
  // Opting out.
  argv = {kLdscope, "run", "-q", "--keep-argv", "-o", dir + "/kept.ldscope", "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  r = RunCmd(argv);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(RunCmd({kLdscope, "show", dir + "/kept.ldscope"})
                .out.find("--password=hunter2 --api-key xyzzy DB_TOKEN=plugh --config=keep.yaml"),
            std::string::npos);
}

}  // namespace
}  // namespace ldscope
