// Command trees: fork without exec, a shell pipeline, exec chains, and 8 threads
// calling dlopen at once. Every process image gets its own complete stream (no
// sequence gaps), attributed to the right pid, parent and executable.
#include <gtest/gtest.h>

#include <set>

#include "support/sequence.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kLibA = FIXTURES "/lib/libfix_a.so";
const std::string kLibB = FIXTURES "/lib/libfix_b.so";

void ExpectComplete(const v1::ProcessTimeline& p) {
  EXPECT_EQ(p.missing_seqs(), 0u) << "pid " << p.pid();
  EXPECT_EQ(p.dropped(), 0u) << "pid " << p.pid();
  EXPECT_GT(p.events(), 0u);
}

bool Loaded(const v1::ProcessTimeline& p, const std::string& path) {
  for (const auto& e : p.entries())
    if (e.has_load() && e.load().object().path() == path) return true;
  return false;
}

// dlprobe opens libfix_b, forks, and each process then opens libfix_a.
v1::Timeline ForkTimeline(const std::string& name) {
  const auto trace = testing::ScratchDir(name) + "/t.ldscope";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibB, "fork",
                "open", kLibA});
  EXPECT_EQ(r.code, 0) << r.err;
  return testing::TimelineOf({trace});
}

TEST(Processes, ForkWithoutExecInheritsAndRecords) {
  const auto t = ForkTimeline("proc_fork");
  ASSERT_EQ(t.processes_size(), 2);
  const auto& parent = t.processes(0);
  const auto& child = t.processes(1);
  EXPECT_EQ(child.start_reason(), v1::START_FORK);
  EXPECT_EQ(child.ppid(), static_cast<int32_t>(parent.pid()));
  EXPECT_EQ(child.parent_stream(), parent.stream());
  EXPECT_EQ(child.exe(), DLPROBE);
  for (const auto* p : {&parent, &child}) {
    ExpectComplete(*p);
    EXPECT_TRUE(p->exited());
    EXPECT_TRUE(Loaded(*p, kLibA));
  }
  // The child's libfix_a finds libfix_b already loaded (inherited from the parent).
  for (const auto& e : child.entries()) {
    if (!e.has_load() || e.load().object().path() != kLibA) continue;
    ASSERT_EQ(e.load().reused_size(), 2);  // libfix_b.so and libc.so.6
    EXPECT_EQ(e.load().reused(0).name(), "libfix_b.so");
    EXPECT_EQ(e.load().reused(0).object().path(), kLibB);
    EXPECT_TRUE(e.load().reused(0).loaded_earlier());
  }
  // Inherited objects are the child's own: its exit unloads them, by name.
  int inherited_unloads = 0;
  for (const auto& e : child.entries())
    if (e.has_unload() && e.unload().at_exit() && e.unload().object().path() == kLibB)
      ++inherited_unloads;
  EXPECT_EQ(inherited_unloads, 1);
}

// The model's object table (ProcessTimeline.objects), which analysis indexes: every load
// once with its entry, and the child's inherited objects as rows of their own.
const v1::LoadedObject* Row(const v1::ProcessTimeline& p, const std::string& path) {
  for (const auto& o : p.objects())
    if (o.object().path() == path) return &o;
  return nullptr;
}

TEST(Processes, ObjectTableAcrossFork) {
  const auto t = ForkTimeline("proc_fork_table");
  ASSERT_EQ(t.processes_size(), 2);
  for (const auto& p : t.processes()) {
    size_t loads = 0;
    for (const auto& e : p.entries()) loads += e.has_load();
    size_t with_entry = 0;
    for (const auto& o : p.objects()) {
      if (o.load_entry() == 0) continue;
      ++with_entry;
      ASSERT_LE(o.load_entry(), static_cast<uint32_t>(p.entries_size()));
      const v1::Entry& e = p.entries(static_cast<int>(o.load_entry() - 1));
      ASSERT_TRUE(e.has_load());
      EXPECT_EQ(e.load().object().id(), o.object().id());
      EXPECT_EQ(o.open_seq(), e.seq());
      EXPECT_EQ(o.requester(), e.load().requester().id());
      EXPECT_FALSE(o.inherited());
    }
    EXPECT_EQ(with_entry, loads) << "every load has its row";
  }
  const v1::LoadedObject* b_parent = Row(t.processes(0), kLibB);
  ASSERT_NE(b_parent, nullptr);
  EXPECT_GT(b_parent->load_entry(), 0u);
  EXPECT_EQ(b_parent->found_by(), v1::STEP_AS_GIVEN);  // dlprobe opens it by its path
  EXPECT_TRUE(b_parent->has_close_seq());               // unloaded at exit
  const v1::LoadedObject* b_child = Row(t.processes(1), kLibB);
  ASSERT_NE(b_child, nullptr);
  EXPECT_TRUE(b_child->inherited());
  EXPECT_EQ(b_child->load_entry(), 0u);
  EXPECT_TRUE(b_child->has_close_seq());
  const v1::LoadedObject* a_child = Row(t.processes(1), kLibA);
  ASSERT_NE(a_child, nullptr);
  EXPECT_FALSE(a_child->inherited());
  EXPECT_GT(a_child->load_entry(), 0u);
}

TEST(Processes, ShellPipeline) {
  const auto dir = testing::ScratchDir("proc_pipeline");
  const auto trace = dir + "/t.ldscope";
  const std::string cmd = std::string(DLPROBE) + " open " + kLibA + " | " + DLPROBE + " open " +
                          kLibB + " | /bin/cat | /usr/bin/wc -l";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", "/bin/sh", "-c", cmd});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n");
  const auto t = testing::TimelineOf({trace});
  const auto sh = testing::ByExe(t, "/dash").size() + testing::ByExe(t, "/bash").size();
  EXPECT_GE(sh, 1u);
  auto probes = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_EQ(testing::ByExe(t, "/cat").size(), 1u);
  EXPECT_EQ(testing::ByExe(t, "/wc").size(), 1u);
  std::set<uint32_t> pids;
  for (const auto& p : t.processes()) {
    ExpectComplete(p);
    pids.insert(p.pid());
  }
  EXPECT_EQ(pids.size(), static_cast<size_t>(t.processes_size())) << "one stream per process";
  EXPECT_NE(Loaded(*probes[0], kLibA), Loaded(*probes[1], kLibA));
  EXPECT_TRUE(Loaded(*probes[0], kLibB) && Loaded(*probes[1], kLibB));  // A needs B
}

TEST(Processes, ExecChain) {
  const auto dir = testing::ScratchDir("proc_exec");
  const auto trace = dir + "/t.ldscope";
  auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibB, "exec",
                "/bin/sh", "-c", std::string("exec ") + DLPROBE + " open " + kLibA});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = testing::TimelineOf({trace});
  ASSERT_EQ(t.processes_size(), 3);
  // One pid, three images, in order: dlprobe, sh, dlprobe.
  EXPECT_EQ(t.processes(0).pid(), t.processes(1).pid());
  EXPECT_EQ(t.processes(1).pid(), t.processes(2).pid());
  EXPECT_EQ(t.processes(0).exe(), DLPROBE);
  EXPECT_EQ(t.processes(2).exe(), DLPROBE);
  EXPECT_TRUE(Loaded(t.processes(0), kLibB));
  EXPECT_FALSE(Loaded(t.processes(0), kLibA));
  EXPECT_TRUE(Loaded(t.processes(2), kLibA));
  EXPECT_FALSE(t.processes(0).exited()) << "exec is not an exit";
  EXPECT_TRUE(t.processes(2).exited());
  for (const auto& p : t.processes()) {
    ExpectComplete(p);
    EXPECT_EQ(p.start_reason(), v1::START_EXEC);
  }
}

TEST(Processes, EightThreadsDlopenAtOnce) {
  const auto dir = testing::ScratchDir("proc_threads");
  const auto trace = dir + "/t.ldscope";
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE,
                                  "threads", "8"};
  for (int i = 0; i < 8; ++i) cmd.push_back(FIXTURES "/lib/threads/libfix_t" + std::to_string(i) + ".so");
  auto r = RunCmd(cmd);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "threads 8: 0 failures\n");
  const auto t = testing::TimelineOf({trace});
  ASSERT_EQ(t.processes_size(), 1);
  const auto& p = t.processes(0);
  ExpectComplete(p);
  std::set<uint32_t> tids;
  for (int i = 0; i < 8; ++i) {
    const std::string lib = FIXTURES "/lib/threads/libfix_t" + std::to_string(i) + ".so";
    int loads = 0;
    for (const auto& e : p.entries()) {
      if (e.has_load() && e.load().object().path() == lib) {
        ++loads;
        EXPECT_EQ(e.load().requested_name(), lib);
        tids.insert(e.tid());
      }
    }
    EXPECT_EQ(loads, 1) << lib << " mapped once, however many threads asked";
  }
  EXPECT_EQ(tids.size(), 8u) << "each thread's load is attributed to that thread";
}

// The command line as the kernel has it (the audit library reads argv's strings where
// /proc/self/cmdline does): exactly, and when longer than the start event's 24 KiB, cut
// after the last whole argument that fits and marked truncated.
TEST(Processes, CommandLineWholeAndCut) {
  const auto dir = testing::ScratchDir("proc_cmdline");
  for (int count : {3, 30}) {
    const auto trace = dir + "/t" + std::to_string(count) + ".ldscope";
    std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--",
                                    "/bin/true", ""};
    for (int i = 0; i < count; ++i) cmd.push_back(std::string(1000, static_cast<char>('a' + i % 26)));
    auto r = RunCmd(cmd);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<std::string> argv(cmd.begin() + 7, cmd.end());
    int starts = 0;
    for (const auto& e : testing::EventsOf(trace)) {
      if (!e.has_process_start()) continue;
      ++starts;
      const auto& got = e.process_start().argv();
      // "/bin/true\0" and "\0" take 11 bytes, each argument 1,001: 24 of them fit 24,576.
      const size_t fit = count == 3 ? argv.size() : 2 + 24;
      ASSERT_EQ(static_cast<size_t>(got.size()), fit);
      for (size_t i = 0; i < fit; ++i) EXPECT_EQ(got[static_cast<int>(i)], argv[i]) << i;
      EXPECT_EQ(e.truncated(), count == 30);
    }
    EXPECT_EQ(starts, 1);
  }
}

// The run's summary counts processes: a Python program is one (its hook's connection is
// not another), one that exec'd itself is one of two images, and multiprocessing's
// workers, which end by _exit with every event sent, are not said to have lost any.
TEST(Processes, SummaryCountsProcesses) {
  const auto dir = testing::ScratchDir("summary_counts");
  const std::string trace = dir + "/t.ldscope";
  const auto summary = [&](const std::string& code) {
    const auto r = RunCmd({LDSCOPE_BIN, "run", "--no-report", "-o", trace, "--", "/usr/bin/python3", "-c", code});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.err;
  };
  const std::string one = summary("pass");
  EXPECT_NE(one.find("(1 process, "), std::string::npos) << one;
  const std::string exec = summary("import os; os.execv('/usr/bin/python3', ['python3', '-c', 'pass'])");
  EXPECT_NE(exec.find("(1 process (2 images: exec), "), std::string::npos) << exec;
  // Each worker loads a library, so that it sends events of its own.
  const std::string workers = summary(
      "import ctypes, multiprocessing as m\n"
      "ps = [m.get_context('fork').Process(target=ctypes.CDLL, args=('" +
      kLibA +
      "',)) for _ in range(2)]\n"
      "for p in ps: p.start()\n"
      "for p in ps: p.join()\n");
  EXPECT_NE(workers.find("(3 processes, "), std::string::npos) << workers;
  EXPECT_EQ(workers.find("without an exit event"), std::string::npos) << workers;
  // Each worker ended without its exit event, which the timeline still says.
  size_t no_exit = 0;
  const v1::Timeline t = testing::TimelineOf({trace});
  for (const auto& p : t.processes()) no_exit += !p.exited();
  EXPECT_EQ(no_exit, 2u);
}

}  // namespace
}  // namespace ldscope
