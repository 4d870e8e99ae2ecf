// Trust in ldscope's life cycle: signals (SIGINT sent to `run`, Ctrl-C through a
// terminal, SIGHUP to `collect`), collectors restarted on the same socket, directories
// left by a SIGKILLed `run`, and `imports` given hostile or missing names.
#include <gtest/gtest.h>

#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::ReadFile;
using testing::RunCmd;
using testing::ScratchDir;

const std::string kLdscope = LDSCOPE_BIN;

bool WaitFor(const std::string& path, int ms = 20000) {
  for (int i = 0; i < ms / 10; ++i) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Starts argv with stdout/stderr into files in dir; returns the pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& dir,
            const std::vector<std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (freopen((dir + "/out").c_str(), "w", stdout) == nullptr ||
        freopen((dir + "/err").c_str(), "w", stderr) == nullptr)
      _exit(126);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A Python program that counts the SIGINTs it gets: it marks `ready`, waits for the
// first (10 s at most), gives a second one 300 ms to arrive, and writes the count.
std::string CountSigints(const std::string& dir) {
  return "import signal, time, os\n"
         "n = 0\n"
         "def h(s, f):\n"
         "    global n\n"
         "    n += 1\n"
         "signal.signal(signal.SIGINT, h)\n"
         "open('" + dir + "/ready', 'w').close()\n"
         "end = time.time() + 10\n"
         "while n == 0 and time.time() < end: time.sleep(0.01)\n"
         "time.sleep(0.3)\n"
         "open('" + dir + "/count', 'w').write('SIGINT %d\\n' % n)\n";
}

TEST(Signals, SigintSentToRunIsForwardedOnce) {
  const std::string dir = ScratchDir("signals_kill_int");
  const pid_t pid = Spawn({kLdscope, "run", "-q", "-o", dir + "/t.ldscope", "--", "/usr/bin/python3",
                           "-c", CountSigints(dir)},
                          dir);
  ASSERT_TRUE(WaitFor(dir + "/ready"));
  kill(pid, SIGINT);
  EXPECT_EQ(Wait(pid), 0);
  EXPECT_EQ(ReadFile(dir + "/count"), "SIGINT 1\n");
}

TEST(Signals, CtrlCThroughATerminalReachesTheCommandOnce) {
  const std::string dir = ScratchDir("signals_ctrl_c");
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl(kLdscope.c_str(), kLdscope.c_str(), "run", "-q", "-o", (dir + "/t.ldscope").c_str(), "--",
          "/usr/bin/python3", "-c", CountSigints(dir).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(WaitFor(dir + "/ready"));
  ASSERT_EQ(write(master, "\x03", 1), 1);
  std::thread drain([master] {
    char buf[256];
    while (read(master, buf, sizeof buf) > 0) {
    }
  });
  EXPECT_EQ(Wait(pid), 0);
  drain.join();  // the terminal's last user gone, its reads end (EIO)
  close(master);
  EXPECT_EQ(ReadFile(dir + "/count"), "SIGINT 1\n");
}

struct Collector {
  pid_t pid;
  std::string socket, trace;
  Collector(const std::string& dir, const std::string& name)
      : socket(dir + "/c.sock"), trace(dir + "/" + name + ".ldscope") {
    std::filesystem::create_directories(dir + "/" + name);
    pid = Spawn({kLdscope, "collect", "--socket", socket, "-o", trace}, dir + "/" + name);
  }
};

std::vector<std::string> TracedEnv(const std::string& socket) {
  return {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + socket};
}

TEST(Collect, HangupShutsDownCleanly) {
  const std::string dir = ScratchDir("collect_hup");
  Collector c(dir, "a");
  ASSERT_TRUE(WaitFor(c.socket));
  const auto r = RunCmd({DLPROBE, "open", FIXTURES "/lib/libfix_a.so"}, TracedEnv(c.socket));
  EXPECT_EQ(r.code, 0);
  kill(c.pid, SIGHUP);
  EXPECT_EQ(Wait(c.pid), 0);
  EXPECT_FALSE(std::filesystem::exists(c.socket));
  const auto t = testing::TimelineOf({c.trace});
  EXPECT_EQ(t.problems_size(), 0);
  EXPECT_EQ(testing::ByExe(t, "/dlprobe").size(), 1u);
}

// A collector SIGKILLed leaves its socket; a new one on the same path takes over, and
// a program that was already running reconnects to it (its first event after the
// break is counted as dropped: that send is how it learns of the break).
TEST(Collect, RestartedOnAStaleSocketAndProgramsReconnect) {
  const std::string dir = ScratchDir("collect_restart");
  Collector a(dir, "a");
  ASSERT_TRUE(WaitFor(a.socket));
  std::filesystem::create_directories(dir + "/p");
  std::vector<std::string> env = TracedEnv(a.socket);
  const pid_t prog = Spawn({DLPROBE, "open", FIXTURES "/lib/libfix_a.so", "mark", dir + "/ready",
                            "waitfile", dir + "/go", "open", FIXTURES "/lib/libfix_b.so", "open",
                            FIXTURES "/lib/libfix_orphan.so"},
                           dir + "/p", env);
  ASSERT_TRUE(WaitFor(dir + "/ready"));
  kill(a.pid, SIGKILL);
  Wait(a.pid);
  ASSERT_TRUE(std::filesystem::exists(a.socket));  // stale
  // A live collector's socket is not taken over, and its would-be trace is not touched.
  Collector b(dir, "b");
  for (int i = 0; i < 2000 && ReadFile(dir + "/b/err").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(ReadFile(dir + "/b/err").rfind("ldscope: collecting on ", 0), 0u) << ReadFile(dir + "/b/err");
  const auto clash = RunCmd({kLdscope, "collect", "--socket", a.socket, "-o", b.trace});
  EXPECT_EQ(clash.code, 2);
  EXPECT_EQ(clash.err, "ldscope: cannot listen on " + a.socket + ": another collector is serving it\n");
  testing::WriteFile(dir + "/go", "");
  EXPECT_EQ(Wait(prog), 0);
  kill(b.pid, SIGTERM);
  EXPECT_EQ(Wait(b.pid), 0);
  const auto t = testing::TimelineOf({b.trace});
  const auto procs = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(procs.size(), 1u);
  bool orphan = false;
  for (const auto& line : testing::LoadLines(*procs[0]))
    orphan |= line.find("libfix_orphan.so") != std::string::npos;
  EXPECT_TRUE(orphan) << "the reconnected program's later loads reach the new collector";
}

// Directories of SIGKILLed runs are removed at the next start; nothing else is.
TEST(RunDirs, StaleOnesOfDeadRunsAreRemoved) {
  const std::string dir = ScratchDir("rundirs");
  const std::string tmp = dir + "/tmp";
  std::filesystem::create_directories(tmp);
  std::filesystem::create_directories(dir + "/k");
  const pid_t run = Spawn({kLdscope, "run", "-q", "-o", dir + "/k.ldscope", "--", DLPROBE, "mark",
                           dir + "/ready", "waitfile", dir + "/go"},
                          dir + "/k", {"TMPDIR=" + tmp});
  ASSERT_TRUE(WaitFor(dir + "/ready"));
  kill(run, SIGKILL);
  Wait(run);
  testing::WriteFile(dir + "/go", "");
  // Decoys: a live process's directory, and one holding something else.
  const std::string live = tmp + "/ldscope-LIVE00";
  std::filesystem::create_directories(live);
  chmod(live.c_str(), 0700);
  const std::string stat_line = ReadFile("/proc/self/stat");
  std::string start;
  {
    std::istringstream rest(stat_line.substr(stat_line.rfind(')') + 1));
    for (int i = 3; i <= 22; ++i) rest >> start;
  }
  char ns[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/pid", ns, sizeof ns - 1), 0);
  testing::WriteFile(live + "/owner",
                     "ldscope-run " + std::to_string(getpid()) + " " + start + " " + ns + "\n");
  const std::string other = tmp + "/ldscope-OTHER0";
  std::filesystem::create_directories(other);
  chmod(other.c_str(), 0700);
  testing::WriteFile(other + "/owner", "ldscope-run 999999999 1 " + std::string(ns) + "\n");
  testing::WriteFile(other + "/data", "someone's");
  std::set<std::string> before;
  for (const auto& e : std::filesystem::directory_iterator(tmp)) before.insert(e.path().filename());
  EXPECT_EQ(before.size(), 3u);
  const auto r = RunCmd({kLdscope, "run", "-q", "-o", dir + "/t.ldscope", "--", "/bin/true"},
                        {"TMPDIR=" + tmp});
  EXPECT_EQ(r.code, 0) << r.err;
  std::set<std::string> after;
  for (const auto& e : std::filesystem::directory_iterator(tmp)) after.insert(e.path().filename());
  EXPECT_EQ(after, (std::set<std::string>{"ldscope-LIVE00", "ldscope-OTHER0"}));
}

// A $TMPDIR too long for a socket path under it (a build system's sandbox): the run
// directory goes to /tmp, with a note, and the run works.
TEST(RunDirs, LongTmpdirFallsBackToTmp) {
  const std::string dir = ScratchDir("rundirs_long");
  const std::string tmp = dir + "/" + std::string(100, 'd');
  std::filesystem::create_directories(tmp);
  const auto r =
      RunCmd({kLdscope, "run", "-q", "--no-report", "-o", dir + "/t.ldscope", "--", "/bin/true"}, {"TMPDIR=" + tmp});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "ldscope: $TMPDIR is too long for a socket path under it (" + std::to_string(tmp.size()) +
                       " bytes); the run directory is in /tmp\n");
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
  EXPECT_GT(std::filesystem::file_size(dir + "/t.ldscope"), 0u);
}

// Short of descriptors, `run` fails at its epoll, its socket, the exec pipe or the trace:
// whichever it is, it says so, exits 2 (4 for the trace, an output) with no trace, and
// leaves no run directory behind.
TEST(RunDirs, NoneLeftWhenTheCommandCannotBeStarted) {
  const std::string dir = ScratchDir("rundirs_nofile");
  const std::string tmp = dir + "/tmp";
  std::filesystem::create_directories(tmp);
  std::set<std::string> errors;
  for (int n = 3; n <= 12; ++n) {
    const std::string trace = dir + "/t" + std::to_string(n) + ".ldscope";
    const auto r = RunCmd({"/bin/sh", "-c", "ulimit -n " + std::to_string(n) + " && exec \"$@\"", "sh",
                           kLdscope, "run", "-q", "--no-report", "-o", trace, "--", "/bin/true"},
                          {"TMPDIR=" + tmp});
    if (r.code == 0) continue;
    EXPECT_EQ(r.code, r.err.rfind("ldscope: cannot write " + trace, 0) == 0 ? 4 : 2) << n << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(trace)) << n;
    errors.insert(r.err.substr(0, r.err.find(':', 9)));
    EXPECT_TRUE(std::filesystem::is_empty(tmp)) << n << ": " << r.err;
  }
  // The exec pipe's failure is among them (the path that left its directory behind).
  EXPECT_EQ(errors.count("ldscope: pipe"), 1u) << ::testing::PrintToString(errors);
}

TEST(Imports, ModuleNamesAreDataNotCode) {
  const std::string dir = ScratchDir("imports_injection");
  const std::string evil = "a',__import__('os').system('touch " + dir + "/PWNED'),'b";
  const auto r = RunCmd({kLdscope, "imports", evil, "json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "ldscope: imports: '" + evil +
                       "' is not a module name (dotted Python identifiers, like os.path)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/PWNED"));
}

TEST(Imports, MissingModuleOrInterpreterIsSaid) {
  auto r = RunCmd({kLdscope, "imports", "--python", "/usr/bin/python3", "json", "nonexistent_mod_xyz"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "ldscope: imports: module nonexistent_mod_xyz not found by /usr/bin/python3 "
                   "(ModuleNotFoundError: No module named 'nonexistent_mod_xyz')\n");
  r = RunCmd({kLdscope, "imports", "--python", "/nonexistent", "json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "ldscope: imports: the interpreter /nonexistent: No such file or directory\n");
}

// --help wrapped to the terminal's width (COLUMNS here), flags without CLI11's
// "{false}", and `ldscope help [COMMAND]` the same text as --help.
TEST(Help, WrappedAndByCommand) {
  const auto run = RunCmd({kLdscope, "help", "run"}, {"COLUMNS=60"});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, RunCmd({kLdscope, "run", "--help"}, {"COLUMNS=60"}).out);
  EXPECT_NE(run.out.find("Usage: " + kLdscope + " run [OPTIONS]"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  --no-report "), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("{false}"), std::string::npos) << run.out;
  std::istringstream lines(run.out);
  // (The usage line holds the program's path, as long as the build tree's: not wrapped.)
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(line.size() <= 60 || line.find(' ', 31) == std::string::npos ||
                line == "Usage: " + kLdscope + " run [OPTIONS]")
        << "too wide: " << line;
  const auto top = RunCmd({kLdscope, "help"}, {"COLUMNS=60"});
  EXPECT_EQ(top.code, 0);
  EXPECT_NE(top.out.find("\n  imports "), std::string::npos) << top.out;
  EXPECT_EQ(top.out, RunCmd({kLdscope, "--help"}, {"COLUMNS=60"}).out);
  // A sub-command's sub-command too.
  const auto nested = RunCmd({kLdscope, "hook", "install", "--help"}, {"COLUMNS=60"});
  EXPECT_EQ(nested.code, 0) << nested.err;
  EXPECT_NE(nested.out.find("  --python "), std::string::npos) << nested.out;
  std::istringstream nested_lines(nested.out);
  for (std::string line; std::getline(nested_lines, line);)  // (the usage line holds the build's path)
    EXPECT_TRUE(line.size() <= 60 || line.find(' ', 31) == std::string::npos || line.rfind("Usage: ", 0) == 0)
        << "too wide: " << line;
  const auto bad = RunCmd({kLdscope, "help", "nope"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "ldscope: help: no command 'nope' (ldscope help lists them)\n");
}

}  // namespace
}  // namespace ldscope
