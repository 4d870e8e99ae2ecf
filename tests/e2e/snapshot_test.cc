// `ldscope snapshot`: real processes (tests/drivers/snapwait.c) under the real loader,
// read while they run, and the trace read back by every command.
#include <elf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "e2e/snapshot_support.h"
#include "support/canonical.h"
#include "support/test_support.h"

namespace ldscope::testing {
namespace {

const std::string kFix = FIXTURES;
const std::string kTorch = kFix + "/site-packages/torch/lib/libtorch_cuda.so";
const std::string kOldNccl = kFix + "/system/lib/libnccl.so.2.16.2";

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// The pids in a text replaced by names (the report prints them; Canonicalise turns
// them all into ${PID}, which would hide which process a finding is about).
std::string NamePids(std::string text, const std::vector<std::pair<pid_t, std::string>>& names) {
  for (const auto& [pid, name] : names) {
    text = ReplaceAll(text, "process: " + std::to_string(pid) + " ", "process: " + name + " ");
    text = ReplaceAll(text, "pid " + std::to_string(pid) + " ", "pid " + name + " ");
  }
  return text;
}

// The build tree's test programs and the parent's pid (the test's) out of a text.
std::string Tree(std::string text, pid_t pid) {
  text = ReplaceAll(text, SNAPWAIT_STATIC, "${SNAPWAIT_STATIC}");
  text = ReplaceAll(text, SNAPWAIT, "${SNAPWAIT}");
  char cwd[4096] = {};
  if (getcwd(cwd, sizeof cwd) != nullptr) text = ReplaceAll(text, std::string("cwd ") + cwd + "\n", "cwd ${CWD}\n");
  text = ReplaceAll(text, "(parent pid " + std::to_string(getpid()) + ")", "(parent pid ${TEST})");
  return ReplaceAll(text, "process " + std::to_string(pid) + ":", "process ${SNAPPED}:");
}

// The findings' first lines ("warning[duplicate-library]: ...") of a text report.
std::vector<std::string> Headlines(const std::string& report) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < report.size()) {
    size_t end = report.find('\n', at);
    if (end == std::string::npos) end = report.size();
    const std::string line = report.substr(at, end - at);
    if (line.rfind("error[", 0) == 0 || line.rfind("warning[", 0) == 0 || line.rfind("info[", 0) == 0)
      out.push_back(line);
    at = end + 1;
  }
  return out;
}

// The NCCL situation in both orders, in two running Pythons (ctypes, as the seed
// scenarios load it): torch's libnccl.so.2 (RPATH) then the system's 2.16.2 (two copies),
// and the system's first, then torch lazily bound (ncclCommRegister is missing from the
// copy its NEEDED got, which its first call would hit). The snapshot's report, the same
// report from its trace, and `run` of each order: every finding `run` makes is made.
TEST(Snapshot, NcclBothOrders) {
  const std::string dir = ScratchDir("snapshot_nccl");
  const std::string script = SCENARIOS_DIR "/snapshot_wait.py";
  const std::vector<std::string> torch_first_args = {"open", kTorch, "open", kOldNccl};
  const std::vector<std::string> cupy_first_args = {"open", kOldNccl, "lazy", kTorch};
  auto python = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/python3", script};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  Waiting torch_first(python(torch_first_args));
  Waiting cupy_first(python(cupy_first_args));
  ASSERT_TRUE(torch_first.ready()) << torch_first.said();
  ASSERT_TRUE(cupy_first.ready()) << cupy_first.said();
  const std::string trace = dir + "/t.ldscope";
  const Proc r = RunCmd(
      {LDSCOPE_BIN, "snapshot", "-o", trace, std::to_string(torch_first.pid()), std::to_string(cupy_first.pid())});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("snapshot of 2 processes"), std::string::npos) << r.err;
  const std::vector<std::pair<pid_t, std::string>> names = {{torch_first.pid(), "TORCH_FIRST"},
                                                            {cupy_first.pid(), "CUPY_FIRST"}};
  ExpectGolden("snapshot_nccl_orders.txt", NamePids(r.out, names));
  // The trace reads back into the same report.
  const Proc again = RunCmd({LDSCOPE_BIN, "report", trace});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, r.out);
  const std::vector<std::string> from_snapshot = Headlines(r.out);
  for (const auto& args : {torch_first_args, cupy_first_args}) {
    std::string cmd = std::string(LDSCOPE_BIN) + " run -o " + dir + "/run.ldscope --";
    for (const auto& a : python(args)) cmd += " " + a;
    const Proc run = RunCmd({"/bin/sh", "-c", cmd + " </dev/null"});
    ASSERT_EQ(run.code, 0) << run.err;
    const std::vector<std::string> from_run = Headlines(run.err);
    ASSERT_FALSE(from_run.empty()) << run.err;
    for (const auto& h : from_run)
      EXPECT_NE(std::find(from_snapshot.begin(), from_snapshot.end(), h), from_snapshot.end())
          << "run found: " << h << "\nsnapshot:\n"
          << r.out;
  }
}

// Three ranks of one program (the same argv, RANK apart), read together: the one that
// preloaded another NCCL is named against the others (siblings across the pids given).
// Before snapshots counted as programs of their own, the report had no finding.
TEST(Snapshot, OddRankAmongPids) {
  const std::string dir = ScratchDir("snapshot_ranks");
  const std::string wheel = kFix + "/classes/siblings/nccl/lib/libnccl.so.2";
  const std::string old = kFix + "/classes/siblings/old/libnccl.so.2.18.1";
  std::vector<std::unique_ptr<Waiting>> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<std::string> argv = {"/usr/bin/env", "RANK=" + std::to_string(rank)};
    if (rank == 2) argv.push_back("LD_PRELOAD=" + old);
    for (const std::string& a : {std::string(SNAPWAIT), std::string("open"), wheel}) argv.push_back(a);
    ranks.push_back(std::make_unique<Waiting>(argv));
    ASSERT_TRUE(ranks.back()->ready()) << ranks.back()->said();
  }
  std::vector<std::string> cmd = {LDSCOPE_BIN, "snapshot", "-o", dir + "/t.ldscope"};
  std::vector<std::pair<pid_t, std::string>> names;
  for (int rank = 0; rank < 3; ++rank) {
    cmd.push_back(std::to_string(ranks[rank]->pid()));
    names.push_back({ranks[rank]->pid(), "RANK" + std::to_string(rank)});
  }
  const Proc r = RunCmd(cmd);
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("snapshot_odd_rank.txt", Tree(NamePids(r.out, names), 0));
}

// Two ranks of one program started by one parent (the same argv, RANK apart), read with
// --tree from the parent: both loaded the wheel's libnccl.so.2 first, and rank 1 also
// a second libnccl.so.2 (a path in its environment, as a plugin variable gives one
// rank). Rank 1 differs from its sibling: it holds an extra copy.
TEST(Snapshot, ExtraCopyInOneRank) {
  const std::string dir = ScratchDir("snapshot_extra_copy");
  const std::string wheel = kFix + "/classes/siblings/nccl/lib/libnccl.so.2";
  const std::string old = kFix + "/classes/siblings/old/libnccl.so.2.18.1";
  // Background commands of a non-interactive shell read /dev/null unless redirected:
  // the ranks read the test's pipe (descriptor 3), so closing it ends them.
  const std::string script =
      "exec 3<&0\n"
      "RANK=0 \"$0\" open \"$1\" envopen EXTRA_NCCL <&3 >\"$3/r0\" & echo $! >\"$3/pid0\"\n"
      "RANK=1 EXTRA_NCCL=\"$2\" \"$0\" open \"$1\" envopen EXTRA_NCCL <&3 >\"$3/r1\" & echo $! >\"$3/pid1\"\n"
      "until grep -q ready \"$3/r0\" 2>/dev/null && grep -q ready \"$3/r1\" 2>/dev/null; do\n"
      "  if grep -q failed \"$3/r0\" \"$3/r1\" 2>/dev/null; then cat \"$3/r0\" \"$3/r1\"; exit 1; fi\n"
      "  sleep 0.05\n"
      "done\n"
      "echo ready\n"
      "wait\n";
  Waiting parent({"/bin/sh", "-c", script, SNAPWAIT, wheel, old, dir});
  ASSERT_TRUE(parent.ready()) << parent.said();
  const pid_t rank0 = std::stoi(ReadFile(dir + "/pid0")), rank1 = std::stoi(ReadFile(dir + "/pid1"));
  const Proc r = RunCmd({LDSCOPE_BIN, "snapshot", "-o", dir + "/t.ldscope", "--tree", std::to_string(parent.pid())});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("snapshot of 3 processes"), std::string::npos) << r.err;
  ExpectGolden("snapshot_extra_copy.txt", Tree(NamePids(r.out, {{rank0, "RANK0"}, {rank1, "RANK1"}}), 0));
}

// Every command that reads traces reads a snapshot's.
TEST(Snapshot, EveryReaderTakesIt) {
  const std::string dir = ScratchDir("snapshot_readers");
  // libtorch_cuda.so leaves Py_IsInitialized to Python: lazily bound here.
  Waiting p({SNAPWAIT, "lazy", kTorch});
  ASSERT_TRUE(p.ready()) << p.said();
  const std::string trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "snapshot", "-q", "--no-report", "-o", trace, std::to_string(p.pid())}).code, 0);
  const Proc show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ASSERT_EQ(show.code, 0) << show.err;
  ExpectGolden("snapshot_show.txt", Tree(show.out, p.pid()));
  // No time column: the objects were seen at the read, not loaded then.
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "show", trace}).out, show.out);
  const Proc lock = RunCmd({LDSCOPE_BIN, "lock", "-o", dir + "/l.lock", trace});
  ASSERT_EQ(lock.code, 0) << lock.err;
  ExpectGolden("snapshot_lock.lock",
               std::regex_replace(Tree(ReadFile(dir + "/l.lock"), p.pid()), std::regex("build-id = '[0-9a-f]+'"),
                                  "build-id = '${BUILD_ID}'"));
  const Proc check = RunCmd({LDSCOPE_BIN, "check", "--lock", dir + "/l.lock", trace});
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  const Proc diff = RunCmd({LDSCOPE_BIN, "diff", trace, trace});
  EXPECT_EQ(diff.code, 0) << diff.err;
  const Proc chrome = RunCmd({LDSCOPE_BIN, "export", "--chrome", "-o", dir + "/c.json", trace});
  EXPECT_EQ(chrome.code, 0) << chrome.err;
  EXPECT_TRUE(Exists(dir + "/c.json"));
  // Two hosts' snapshots: the report over hosts.
  mkdir((dir + "/a").c_str(), 0700);
  mkdir((dir + "/b").c_str(), 0700);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "snapshot", "-q", "--no-report", "-o", dir + "/a/t.ldscope", std::to_string(p.pid())},
                   {"LDSCOPE_HOST=host-a"})
                .code,
            0);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "snapshot", "-q", "--no-report", "-o", dir + "/b/t.ldscope", std::to_string(p.pid())},
                   {"LDSCOPE_HOST=host-b"})
                .code,
            0);
  const Proc hosts = RunCmd({LDSCOPE_BIN, "report", dir + "/a", dir + "/b"});
  EXPECT_EQ(hosts.code, 0) << hosts.err;
  EXPECT_NE(hosts.out.find("2 hosts compared"), std::string::npos) << hosts.out;
}

// A dlmopen namespace: its objects with their namespace, after the main one's.
TEST(Snapshot, DlmopenNamespace) {
  const std::string dir = ScratchDir("snapshot_dlmopen");
  Waiting p({SNAPWAIT, "open", kFix + "/lib/libfix_a.so", "mopen", kFix + "/lib/libfix_b.so"});
  ASSERT_TRUE(p.ready()) << p.said();
  const std::string trace = dir + "/t.ldscope";
  const Proc r = RunCmd({LDSCOPE_BIN, "snapshot", "-q", "--no-report", "-o", trace, std::to_string(p.pid())});
  ASSERT_EQ(r.code, 0) << r.err;
  const v1::Timeline t = TimelineOf({trace});
  ASSERT_EQ(t.processes_size(), 1);
  const auto& proc = t.processes(0);
  EXPECT_EQ(proc.snapshot().namespaces(), 2u);
  EXPECT_EQ(proc.snapshot().r_version(), 2u);
  std::set<std::string> ns1;
  for (const auto& o : proc.objects())
    if (o.object().lmid() == 1) ns1.insert(o.object().path().substr(o.object().path().rfind('/') + 1));
  // The namespace's own copy of the object (the fixture needs nothing else).
  EXPECT_EQ(ns1, std::set<std::string>{"libfix_b.so"});
  const Proc show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ExpectGolden("snapshot_dlmopen.txt", Tree(show.out, p.pid()));
}

// A process in a pid namespace of its own (unshare -r --pid --fork): --tree finds it
// under unshare, and it is recorded with the pid it sees itself as.
TEST(Snapshot, OwnPidNamespace) {
  const std::string dir = ScratchDir("snapshot_pidns");
  Waiting p({"unshare", "-r", "--pid", "--fork", SNAPWAIT, "open", kFix + "/lib/libfix_a.so"});
  ASSERT_TRUE(p.ready()) << "unshare -r --pid --fork could not start the process (the kernel refuses user or pid "
                            "namespaces here?): "
                         << p.said();
  const std::string trace = dir + "/t.ldscope";
  const Proc r = RunCmd({LDSCOPE_BIN, "snapshot", "-q", "--no-report", "-o", trace, "--tree", std::to_string(p.pid())});
  ASSERT_EQ(r.code, 0) << r.err;
  const v1::Timeline t = TimelineOf({trace});
  const auto inside = ByExe(t, "/snapwait");
  ASSERT_EQ(inside.size(), 1u);
  EXPECT_EQ(inside[0]->pid(), 1u);             // as it sees itself
  EXPECT_NE(inside[0]->pid_namespace(), 0u);   // another namespace than ldscope's
  EXPECT_NE(inside[0]->snapshot().pid(), 1u);  // as given: ours
  EXPECT_EQ(ByExe(t, "/unshare").size(), 1u);
  bool has_fix = false;
  for (const auto& o : inside[0]->objects()) has_fix |= o.object().path() == kFix + "/lib/libfix_a.so";
  EXPECT_TRUE(has_fix);
}

// Another user's process is refused, saying by which rule and how to allow it; nothing
// is written. As root, both sides run as other users (setpriv); otherwise ldscope
// itself is the other user and pid 1 (root's) the process.
TEST(Snapshot, OtherUserRefused) {
  const std::string dir = ScratchDir("snapshot_refused");
  chmod(dir.c_str(), 0777);
  const std::string trace = dir + "/t.ldscope";
  std::vector<std::string> as_other;
  std::unique_ptr<Waiting> target;
  pid_t pid = 1;
  if (geteuid() == 0) {
    target = std::make_unique<Waiting>(
        std::vector<std::string>{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SNAPWAIT});
    ASSERT_TRUE(target->ready()) << target->said();
    pid = target->pid();
    as_other = {"/usr/bin/setpriv", "--reuid=65533", "--regid=65533", "--clear-groups"};
  }
  std::vector<std::string> cmd = as_other;
  for (const std::string& a :
       {std::string(LDSCOPE_BIN), std::string("snapshot"), std::string("-o"), trace, std::to_string(pid)})
    cmd.push_back(a);
  const Proc r = RunCmd(cmd);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(
      r.err.find(geteuid() == 0 ? "the process runs as uid 65534, ldscope as uid 65533" : "the process runs as uid 0"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("CAP_SYS_PTRACE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no trace written"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(trace));
  if (geteuid() == 0) {
    // And a root process, read by an unprivileged ldscope.
    Waiting root_proc({SNAPWAIT});
    ASSERT_TRUE(root_proc.ready());
    cmd = {"/usr/bin/setpriv",
           "--reuid=65534",
           "--regid=65534",
           "--clear-groups",
           LDSCOPE_BIN,
           "snapshot",
           "-o",
           trace,
           std::to_string(root_proc.pid())};
    const Proc r2 = RunCmd(cmd);
    EXPECT_EQ(r2.code, 2) << r2.err;
    EXPECT_NE(r2.err.find("the process runs as uid 0, ldscope as uid 65534"), std::string::npos) << r2.err;
    EXPECT_FALSE(Exists(trace));
  }
}

// A process that made itself not dumpable, read by ldscope of the same user without
// CAP_SYS_PTRACE (as root: both as nobody): the refusal names that rule.
TEST(Snapshot, NotDumpableRefused) {
  const std::string dir = ScratchDir("snapshot_nodump");
  chmod(dir.c_str(), 0777);
  std::vector<std::string> as_user;
  if (geteuid() == 0) as_user = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  std::vector<std::string> argv = as_user;
  for (const std::string& a : {std::string(SNAPWAIT), std::string("nodump"), std::string("-")}) argv.push_back(a);
  Waiting target(argv);
  ASSERT_TRUE(target.ready()) << target.said();
  std::vector<std::string> cmd = as_user;
  for (const std::string& a : {std::string(LDSCOPE_BIN), std::string("snapshot"), std::string("-o"), dir + "/t.ldscope",
                               std::to_string(target.pid())})
    cmd.push_back(a);
  const Proc r = RunCmd(cmd);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(": the process is not dumpable (a set-user-ID or file-capability program, or "
                       "prctl(PR_SET_DUMPABLE, 0)), so only a process with CAP_SYS_PTRACE may read it"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(Exists(dir + "/t.ldscope"));
}

// A process that has ended (a zombie) is said to have ended, and one killed while it is
// read gives a whole snapshot or that message: never a part of it.
TEST(Snapshot, ProcessThatExits) {
  const std::string dir = ScratchDir("snapshot_exits");
  const std::string trace = dir + "/t.ldscope";
  {
    Waiting p({SNAPWAIT, "open", kFix + "/lib/libfix_a.so"});
    ASSERT_TRUE(p.ready());
    p.Release();
    usleep(200000);  // it exits; unreaped, its pid stays
    const Proc r = RunCmd({LDSCOPE_BIN, "snapshot", "-o", trace, std::to_string(p.pid())});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("pid " + std::to_string(p.pid()) + ": it has ended"), std::string::npos) << r.err;
    EXPECT_FALSE(Exists(trace));
  }
  int whole = 0, ended = 0;
  for (int i = 0; i < 20; ++i) {
    Waiting p({SNAPWAIT, "lazy", kTorch, "open", kOldNccl, "open", kFix + "/lib/libfix_a.so"});
    ASSERT_TRUE(p.ready());
    const pid_t victim = p.pid();
    const pid_t killer = fork();
    if (killer == 0) {
      usleep(static_cast<useconds_t>(i * 150));
      kill(victim, SIGKILL);
      _exit(0);
    }
    const Proc r = RunCmd({LDSCOPE_BIN, "snapshot", "-q", "--no-report", "-o", trace, std::to_string(victim)});
    waitpid(killer, nullptr, 0);
    if (r.code == 0) {
      ++whole;
      const v1::Timeline t = TimelineOf({trace});
      ASSERT_EQ(t.processes_size(), 1);
      std::set<std::string> paths;
      for (const auto& o : t.processes(0).objects()) paths.insert(o.object().path());
      EXPECT_EQ(paths.count(kFix + "/lib/libfix_a.so"), 1u) << "a partial snapshot was written";
      EXPECT_EQ(paths.count(kOldNccl), 1u);
    } else {
      ++ended;
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_TRUE(r.err.find("ended") != std::string::npos || r.err.find("no such process") != std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find("no trace written"), std::string::npos) << r.err;
    }
    unlink(trace.c_str());
  }
  std::printf("killed while read: %d whole snapshots, %d said it ended\n", whole, ended);
}

// A process that dlopens and dlcloses in a loop: each snapshot is consistent (the
// objects that stay, with the churned one or without it), retried when the loader was
// busy, never failed.
TEST(Snapshot, DlopenLoop) {
  const std::string dir = ScratchDir("snapshot_churn");
  const std::string churned = kFix + "/lib/libfix_b.so";
  Waiting p({SNAPWAIT, "open", kOldNccl, "churn", churned});
  ASSERT_TRUE(p.ready());
  int retried = 0, with = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string trace = dir + "/t" + std::to_string(i) + ".ldscope";
    const Proc r = RunCmd({LDSCOPE_BIN, "snapshot", "--no-report", "--no-facts", "-o", trace, std::to_string(p.pid())});
    ASSERT_EQ(r.code, 0) << r.err;
    retried += r.err.find("changed while reading, retried") != std::string::npos;
    const v1::Timeline t = TimelineOf({trace});
    ASSERT_EQ(t.processes_size(), 1);
    std::vector<std::string> paths;
    for (const auto& o : t.processes(0).objects()) paths.push_back(o.object().path());
    ASSERT_FALSE(paths.empty());
    EXPECT_EQ(std::count(paths.begin(), paths.end(), kOldNccl), 1);
    const auto n = std::count(paths.begin(), paths.end(), churned);
    EXPECT_LE(n, 1);
    with += n;
    if (t.processes(0).snapshot().tries() > 1) {
      EXPECT_NE(r.err.find("changed while reading, retried"), std::string::npos) << r.err;
    }
  }
  std::printf("20 snapshots of a dlopen loop: %d retried, %d with the churned object\n", retried, with);
}

// A copy of snapwait whose DT_DEBUG entry is renamed (to DT_CHECKSUM, which ld.so
// ignores), so that ld.so never fills it in: the reader finds r_debug through ld.so's
// _r_debug symbol instead.
std::string WithoutDtDebug(const std::string& dir) {
  std::string elf = ReadFile(SNAPWAIT);
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, elf.data() + eh.e_phoff + static_cast<size_t>(i) * sizeof ph, sizeof ph);
    if (ph.p_type != PT_DYNAMIC) continue;
    for (size_t at = ph.p_offset; at + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      std::memcpy(&d, elf.data() + at, sizeof d);
      if (d.d_tag != DT_DEBUG) continue;
      d.d_tag = DT_CHECKSUM;
      std::memcpy(elf.data() + at, &d, sizeof d);
    }
  }
  const std::string out = dir + "/snapwait-no-dt-debug";
  WriteFile(out, elf);
  chmod(out.c_str(), 0755);
  return out;
}

TEST(Snapshot, RDebugSymbolWithoutDtDebug) {
  const std::string dir = ScratchDir("snapshot_no_dt_debug");
  const std::string prog = WithoutDtDebug(dir);
  ASSERT_EQ(RunCmd({"/bin/sh", "-c", "readelf -d " + prog + " | grep -c '(DEBUG)'"}).out, "0\n");
  Waiting p({prog, "open", kFix + "/lib/libfix_a.so"});
  ASSERT_TRUE(p.ready()) << p.said();
  const Proc r =
      RunCmd({LDSCOPE_BIN, "snapshot", "-q", "--no-report", "-o", dir + "/t.ldscope", std::to_string(p.pid())});
  ASSERT_EQ(r.code, 0) << r.err;
  const v1::Timeline t = TimelineOf({dir + "/t.ldscope"});
  ASSERT_EQ(t.processes_size(), 1);
  EXPECT_EQ(t.processes(0).snapshot().found_via(), "_r_debug");
  std::vector<std::string> lines = LoadLines(t.processes(0));
  EXPECT_NE(std::find_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(kFix + "/lib/libfix_a.so") != std::string::npos; }),
            lines.end());
}

// A statically linked process has no link map: said so, not an empty answer.
TEST(Snapshot, StaticBinary) {
  const std::string dir = ScratchDir("snapshot_static");
  Waiting p({SNAPWAIT_STATIC});
  ASSERT_TRUE(p.ready());
  const Proc r = RunCmd({LDSCOPE_BIN, "snapshot", "-o", dir + "/t.ldscope", std::to_string(p.pid())});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("snapshot_static.txt", Tree(NamePids(r.out, {{p.pid(), "STATIC"}}), p.pid()));
}

// The wheel's Python package, laid out as scripts/dist lays it out (its __init__.py and
// __main__.py from the code that writes the wheel, the binary in data/bin): `python -m
// ldscope snapshot`, ldscope.snapshot() of the Python itself, its error, and the IPython
// magic (Debian's python3-ipython) as text and as the HTML table a notebook shows.
TEST(Snapshot, PythonPackage) {
  const std::string dir = ScratchDir("snapshot_python");
  const std::string pkg = dir + "/site/ldscope";
  ASSERT_EQ(RunCmd({"/bin/mkdir", "-p", pkg + "/data/bin"}).code, 0);
  ASSERT_EQ(symlink(LDSCOPE_BIN, (pkg + "/data/bin/ldscope").c_str()), 0);
  const Proc made = RunCmd({"/usr/bin/python3", "-c",
                            "import importlib.machinery as m, sys\n"
                            "d = m.SourceFileLoader('dist', sys.argv[1]).load_module()\n"
                            "open(sys.argv[2] + '/__init__.py', 'w').write(d.package_init('0.0.0'))\n"
                            "open(sys.argv[2] + '/__main__.py', 'w').write(d.WHEEL_MAIN)\n",
                            SOURCE_DIR "/scripts/dist", pkg});
  ASSERT_EQ(made.code, 0) << made.err;
  const std::string path = "PYTHONPATH=" + dir + "/site";
  Waiting p({SNAPWAIT, "open", kOldNccl});
  ASSERT_TRUE(p.ready());
  const Proc m = RunCmd({"/usr/bin/python3", "-m", "ldscope", "snapshot", "-q", "--no-report", "-o", dir + "/t.ldscope",
                         std::to_string(p.pid())},
                        {path});
  EXPECT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(TimelineOf({dir + "/t.ldscope"}).processes_size(), 1);
  const std::string load =
      "import ctypes, os, ldscope\nctypes.CDLL('" + kTorch + "', os.RTLD_NOW)\nctypes.CDLL('" + kOldNccl + "')\n";
  const Proc api = RunCmd(
      {"/usr/bin/python3", "-c",
       load + "for f in ldscope.snapshot().findings: print(f.severity, f.kind, f.headline, f.pid == os.getpid())\n"
              "try:\n    ldscope.snapshot(999999999)\nexcept ldscope.SnapshotError as e:\n    print('error:', e)\n"},
      {path});
  EXPECT_EQ(api.code, 0) << api.err;
  EXPECT_EQ(api.out,
            "warning duplicate-library two copies of libnccl.so.2 are loaded together (namespace 0) True\n"
            "error: ldscope: snapshot: pid 999999999: no such process\n"
            "ldscope: snapshot: 1 of 1 process could not be read; no trace written\n");
  const Proc ipy = RunCmd({"/usr/bin/python3", "-c",
                           load + "from IPython.core.interactiveshell import InteractiveShell\n"
                                  "ip = InteractiveShell.instance()\n"
                                  "ip.run_line_magic('load_ext', 'ldscope')\n"
                                  "r = ip.run_line_magic('ldscope', '')\n"
                                  "print(r._repr_html_().split('</tr>')[1])\n"
                                  "print(repr(r).splitlines()[0])\n"},
                          {path});
  EXPECT_EQ(ipy.code, 0) << ipy.err;
  EXPECT_NE(ipy.out.find("<tr><td>warning</td><td>duplicate-library</td><td>two copies of libnccl.so.2 are loaded "
                         "together (namespace 0)</td>"),
            std::string::npos)
      << ipy.out << ipy.err;
  EXPECT_NE(
      ipy.out.find("\nwarning[duplicate-library]: two copies of libnccl.so.2 are loaded together (namespace 0)\n"),
      std::string::npos)
      << ipy.out;
}

// DIR/site/ldscope: the package with its pytest plugin, as scripts/dist lays it out, and
// the build's ldscope as its binary.
void MakePytestPackage(const std::string& dir) {
  const std::string pkg = dir + "/site/ldscope";
  ASSERT_EQ(RunCmd({"/bin/mkdir", "-p", pkg + "/data/bin"}).code, 0);
  ASSERT_EQ(symlink(LDSCOPE_BIN, (pkg + "/data/bin/ldscope").c_str()), 0);
  const Proc made = RunCmd({"/usr/bin/python3", "-c",
                            "import importlib.machinery as m, sys\n"
                            "d = m.SourceFileLoader('dist', sys.argv[1]).load_module()\n"
                            "open(sys.argv[2] + '/__init__.py', 'w').write(d.package_init('0.0.0'))\n"
                            "open(sys.argv[2] + '/pytest_plugin.py', 'w').write(d.package_file('pytest_plugin.py'))\n",
                            SOURCE_DIR "/scripts/dist", pkg});
  ASSERT_EQ(made.code, 0) << made.err;
}

// pytest --ldscope (Debian's python3-pytest) on a small suite: the test that failed on a
// loader error gets the section (the error, then what the snapshot of the test process
// finds), its JUnit test case the findings' headlines and the section as system-out; the test that failed otherwise
// gets nothing; the session ends with the process's report. Without --ldscope, nothing.
TEST(Snapshot, PytestPlugin) {
  const std::string dir = ScratchDir("snapshot_pytest");
  ASSERT_NO_FATAL_FAILURE(MakePytestPackage(dir));
  const std::vector<std::string> env = {"PYTHONPATH=" + dir + "/site", "FIXTURES=" + kFix,
                                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"};
  const std::string suite = PYFIXTURES_DIR "/snapshot_suite/test_loader.py";
  const Proc r = RunCmd({"/usr/bin/python3", "-m", "pytest", "-p", "ldscope.pytest_plugin", "--ldscope", "-rA", "-q",
                         "-p", "no:cacheprovider", "--junitxml", dir + "/junit.xml", suite},
                        env);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("- ldscope -"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loader error: " + kFix + "/lib/libfix_bad.so: undefined symbol: fix_missing_symbol"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nwarning[duplicate-library]: two copies of libnccl.so.2 are loaded together (namespace 0)\n"),
            std::string::npos)
      << r.out;
  // One section: the unrelated failure has none.
  size_t sections = 0;
  for (size_t at = r.out.find("loader error: "); at != std::string::npos; at = r.out.find("loader error: ", at + 1))
    ++sections;
  EXPECT_EQ(sections, 1u) << r.out;
  EXPECT_NE(r.out.find("ldscope: the test process at the end of the session"), std::string::npos) << r.out;
  const std::string junit = ReadFile(dir + "/junit.xml");
  EXPECT_NE(junit.find("<property name=\"ldscope\" value=\"warning[duplicate-library]: two copies of libnccl.so.2 "
                       "are loaded together (namespace 0)\""),
            std::string::npos)
      << junit;
  EXPECT_NE(junit.find("<system-out>loader error: " + kFix + "/lib/libfix_bad.so: undefined symbol"), std::string::npos)
      << junit;
  const Proc plain = RunCmd(
      {"/usr/bin/python3", "-m", "pytest", "-p", "ldscope.pytest_plugin", "-rA", "-q", "-p", "no:cacheprovider", suite},
      env);
  EXPECT_EQ(plain.code, 1);
  EXPECT_EQ(plain.out.find("ldscope"), std::string::npos) << plain.out;
}

// The lines of text from the one starting with `first` up to (without) the next one
// starting with `end`; empty when there is no such line.
std::string Block(const std::string& text, const std::string& first, const std::string& end) {
  const size_t from = text.find("\n" + first);
  if (from == std::string::npos) return "";
  const size_t to = text.find("\n" + end, from + 1);
  return text.substr(from + 1, to == std::string::npos ? std::string::npos : to - from);
}

// pytest --ldscope -n 2 (Debian's python3-pytest-xdist): the section of the test that
// failed on a loader error in a worker reaches the controller's -rA output and its JUnit
// test case (the property and system-out); the session ends with one report on the
// controller and both workers, which bound different NCCLs (tests/pyfixtures/xdist_suite
// loads one per worker), so the report names the odd one out.
TEST(Snapshot, PytestPluginXdist) {
  const std::string dir = ScratchDir("snapshot_pytest_xdist");
  ASSERT_NO_FATAL_FAILURE(MakePytestPackage(dir));
  const Proc r = RunCmd(
      {"/usr/bin/python3", "-m", "pytest", "-p", "xdist.plugin", "-n", "2", "-p", "ldscope.pytest_plugin", "--ldscope",
       "-rA", "-q", "-p", "no:cacheprovider", "--junitxml", dir + "/junit.xml", PYFIXTURES_DIR "/xdist_suite"},
      {"PYTHONPATH=" + dir + "/site", "FIXTURES=" + kFix, "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  // The processes by role: the pids the end-of-session report lists.
  std::map<std::string, std::string> pids;
  const std::regex listed("\n(controller|gw[0-9]+): pid ([0-9]+)");
  for (std::sregex_iterator m(r.out.begin(), r.out.end(), listed), e; m != e; ++m)
    pids[(*m)[2].str()] = (*m)[1].str() == "controller" ? "CONTROLLER" : (*m)[1].str() == "gw0" ? "GW0" : "GW1";
  ASSERT_EQ(pids.size(), 3u) << r.out;
  auto name = [&](std::string text, bool any_worker) {
    for (const auto& [pid, role] : pids)
      text = std::regex_replace(text, std::regex("\\b" + pid + "\\b"),
                                any_worker && role != "CONTROLLER" ? "WORKER" : role);
    return text;
  };
  // The section: its title line (dashes around " ldscope "), then its text up to the
  // next line of "=".
  const size_t title = r.out.rfind('\n', r.out.find("- ldscope -"));
  ASSERT_NE(title, std::string::npos) << r.out;
  const std::string section = Block(r.out.substr(title), "-", "=");
  const std::string body = section.substr(section.find('\n') + 1);
  const Proc junit = RunCmd({"/usr/bin/python3", "-c",
                             "import sys, xml.etree.ElementTree as ET\n"
                             "for c in sorted(ET.parse(sys.argv[1]).iter('testcase'), key=lambda c: c.get('name')):\n"
                             "    print(c.get('name'))\n"
                             "    for p in c.iter('property'):\n"
                             "        print('  property %s: %s' % (p.get('name'), p.get('value')))\n"
                             "    for o in c.iter('system-out'):\n"
                             "        print('  system-out is the section:', o.text == sys.argv[2])\n",
                             dir + "/junit.xml", body});
  ASSERT_EQ(junit.code, 0) << junit.err;
  const size_t at = r.out.find("ldscope: the test process and its");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string tail = r.out.substr(at);
  ExpectGolden("snapshot_pytest_xdist.txt", "-- the failed test's section (-rA), from the worker that ran it:\n" +
                                                name(section, true) + "-- the JUnit test cases:\n" + junit.out +
                                                "-- the end of the session:\n" +
                                                name(tail.substr(0, tail.find("\n=")), false) + "\n");
}

// The venv's files: each path, its mode, and its content's hash (a link's target).
std::string Listing(const std::string& root) {
  const Proc r = RunCmd({"/usr/bin/python3", "-c",
                         "import hashlib, os, sys\n"
                         "root = sys.argv[1]\n"
                         "for d, dirs, files in os.walk(root):\n"
                         "    dirs.sort()\n"
                         "    for n in sorted(dirs + files):\n"
                         "        p = os.path.join(d, n)\n"
                         "        st = os.lstat(p)\n"
                         "        if os.path.islink(p):\n"
                         "            h = os.readlink(p)\n"
                         "        elif os.path.isfile(p):\n"
                         "            h = hashlib.sha256(open(p, 'rb').read()).hexdigest()\n"
                         "        else:\n"
                         "            h = ''\n"
                         "        print(os.path.relpath(p, root), oct(st.st_mode), h)\n",
                         root});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

// `ldscope hook install` in a venv (/usr/bin/python3 -m venv): a program ended by an
// import's undefined symbol prints its traceback exactly as without the hook, then the
// snapshot's report (golden); the exit status is the same. A healthy program and one
// ended by another ImportError print exactly what they print without it. Uninstall
// leaves the venv as it was, file for file, and the program as without the hook.
TEST(Hook, InstallExplainUninstall) {
  const std::string dir = ScratchDir("hook_venv");
  const std::string venv = dir + "/venv";
  const Proc made = RunCmd({"/usr/bin/python3", "-m", "venv", "--without-pip", venv});
  ASSERT_EQ(made.code, 0) << made.err;
  const std::string python = venv + "/bin/python";
  const std::string program = PYFIXTURES_DIR "/app/hook_import.py";
  auto run = [&](const std::string& what) { return RunCmd({python, program, kFix, what}, {}, {"PYTHONPATH"}); };
  const Proc bare_loader = run("loader"), bare_healthy = run("healthy"), bare_other = run("other");
  ASSERT_EQ(bare_loader.code, 1) << bare_loader.err;
  ASSERT_NE(bare_loader.err.find("undefined symbol"), std::string::npos) << bare_loader.err;
  ASSERT_EQ(bare_healthy.code, 0) << bare_healthy.err;
  ASSERT_EQ(bare_other.code, 1) << bare_other.err;
  const std::string before = Listing(venv);

  const Proc installed = RunCmd({LDSCOPE_BIN, "hook", "install", "--python", python});
  ASSERT_EQ(installed.code, 0) << installed.err;
  EXPECT_NE(installed.err.find("installed "), std::string::npos) << installed.err;
  const Proc loader = run("loader");
  EXPECT_EQ(loader.code, bare_loader.code);
  EXPECT_EQ(loader.out, bare_loader.out);
  ASSERT_EQ(loader.err.rfind(bare_loader.err, 0), 0u) << "the traceback changed:\n" << loader.err;
  // What follows the traceback (whose markers vary with Python's version).
  ExpectGolden("hook_loader_error.txt", loader.err.substr(bare_loader.err.size()));
  for (const auto& [what, bare] : {std::pair{"healthy", &bare_healthy}, std::pair{"other", &bare_other}}) {
    const Proc p = run(what);
    EXPECT_EQ(p.code, bare->code) << what;
    EXPECT_EQ(p.out, bare->out) << what;
    EXPECT_EQ(p.err, bare->err) << what;
  }

  const Proc removed = RunCmd({LDSCOPE_BIN, "hook", "uninstall", "--python", python});
  ASSERT_EQ(removed.code, 0) << removed.err;
  EXPECT_NE(removed.err.find("removed "), std::string::npos) << removed.err;
  EXPECT_EQ(Listing(venv), before);
  const Proc after = run("loader");
  EXPECT_EQ(after.code, bare_loader.code);
  EXPECT_EQ(after.err, bare_loader.err);
}

// install and uninstall touch only a file install wrote: another ldscope-hook.pth is
// left as it is (status 2), a second install replaces its own, a second uninstall finds
// nothing to remove; a Python that cannot be run is an error naming it.
TEST(Hook, OnlyItsOwnFile) {
  const std::string dir = ScratchDir("hook_own_file");
  const std::string pth = dir + "/ldscope-hook.pth";
  WriteFile(pth, "import os\n");
  const Proc refused = RunCmd({LDSCOPE_BIN, "hook", "install", "--target", dir});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("was not written by ldscope; left as it is"), std::string::npos) << refused.err;
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "hook", "uninstall", "--target", dir}).code, 2);
  EXPECT_EQ(ReadFile(pth), "import os\n");
  ASSERT_EQ(unlink(pth.c_str()), 0);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "hook", "install", "-q", "--target", dir}).code, 0);
  const std::string first = ReadFile(pth);
  const Proc again = RunCmd({LDSCOPE_BIN, "hook", "install", "--target", dir});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("replaced "), std::string::npos) << again.err;
  EXPECT_EQ(ReadFile(pth), first);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "hook", "uninstall", "--target", dir}).code, 0);
  EXPECT_FALSE(Exists(pth));
  const Proc none = RunCmd({LDSCOPE_BIN, "hook", "uninstall", "--target", dir});
  EXPECT_EQ(none.code, 0);
  EXPECT_NE(none.err.find("nothing to remove"), std::string::npos) << none.err;
  const Proc no_python = RunCmd({LDSCOPE_BIN, "hook", "install", "--python", dir + "/no-such-python"});
  EXPECT_EQ(no_python.code, 2);
  EXPECT_NE(no_python.err.find("cannot run "), std::string::npos) << no_python.err;
}

// --user: the hook goes into the user site of --python (under $HOME, which must exist),
// and a Python with that user site explains its loader error; uninstall --user removes
// it.
TEST(Hook, UserSite) {
  const std::string dir = ScratchDir("hook_user");
  const std::vector<std::string> home = {"HOME=" + dir};
  const Proc where = RunCmd({"/usr/bin/python3", "-I", "-c", "import site; print(site.getusersitepackages())"}, home);
  ASSERT_EQ(where.code, 0) << where.err;
  const std::string site = where.out.substr(0, where.out.find('\n'));
  ASSERT_EQ(site.rfind(dir + "/", 0), 0u) << site;
  const Proc missing = RunCmd({LDSCOPE_BIN, "hook", "install", "--user", "--python", "/usr/bin/python3"}, home);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("create it first"), std::string::npos) << missing.err;
  ASSERT_EQ(RunCmd({"/bin/mkdir", "-p", site}).code, 0);
  const Proc installed = RunCmd({LDSCOPE_BIN, "hook", "install", "--user", "--python", "/usr/bin/python3"}, home);
  ASSERT_EQ(installed.code, 0) << installed.err;
  EXPECT_TRUE(Exists(site + "/ldscope-hook.pth"));
  const std::vector<std::string> argv = {"/usr/bin/python3", PYFIXTURES_DIR "/app/hook_import.py", kFix, "loader"};
  const Proc explained = RunCmd(argv, home, {"PYTHONPATH", "PYTHONNOUSERSITE"});
  EXPECT_EQ(explained.code, 1);
  EXPECT_NE(explained.err.find("\nldscope hook: a loader error ended this program: "), std::string::npos)
      << explained.err;
  EXPECT_NE(explained.err.find("\nwarning[duplicate-library]: two copies of libnccl.so.2"), std::string::npos)
      << explained.err;
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "hook", "uninstall", "--user", "--python", "/usr/bin/python3"}, home).code, 0);
  EXPECT_FALSE(Exists(site + "/ldscope-hook.pth"));
  const Proc plain = RunCmd(argv, home, {"PYTHONPATH", "PYTHONNOUSERSITE"});
  EXPECT_EQ(plain.code, 1);
  EXPECT_EQ(plain.err.find("ldscope hook"), std::string::npos) << plain.err;
}

// Bad requests: nothing to read, a pid that does not exist.
TEST(Snapshot, NoSuchProcess) {
  const std::string dir = ScratchDir("snapshot_nosuch");
  const Proc none = RunCmd({LDSCOPE_BIN, "snapshot", "-o", dir + "/t.ldscope"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("no process given"), std::string::npos) << none.err;
  const Proc gone = RunCmd({LDSCOPE_BIN, "snapshot", "-o", dir + "/t.ldscope", "999999999"});
  EXPECT_EQ(gone.code, 2);
  EXPECT_NE(gone.err.find("pid 999999999: no such process"), std::string::npos) << gone.err;
  EXPECT_FALSE(Exists(dir + "/t.ldscope"));
}

}  // namespace
}  // namespace ldscope::testing
