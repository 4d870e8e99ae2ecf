// The audit library sends the events of one loader transaction together (one datagram,
// or one write in LDSCOPE_DIR mode) and everything else at once. Checked on the wire
// with a receiver of our own: every datagram splits into valid events, sequence numbers
// are complete, transactions arrive whole while the program still runs, a dlopen that
// finds nothing is not held back, and a forked child never sends what its parent held.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ipc/server.h"
#include "store/trace_file.h"
#include "support/test_support.h"

extern char** environ;

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kLibA = FIXTURES "/lib/libfix_a.so";
const std::string kLibB = FIXTURES "/lib/libfix_b.so";
const std::string kHoldAudit = FIXTURES "/audit/libhold_audit.so";

// A program started in the background with extra environment entries. The receiver
// here reads datagrams: the audit library is told to send its events on the connection
// (its transport without a ring, ring_test checks the ring's).
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const auto& s : set) env.push_back(s);
  env.push_back("LDSCOPE_TRANSPORT=datagram");
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> a, e;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(s.data());
    e.push_back(nullptr);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
  return pid;
}

bool Running(pid_t pid) {
  int st = 0;
  return waitpid(pid, &st, WNOHANG) == 0;
}

// One datagram as received, and its events.
struct Datagram {
  size_t size = 0;
  bool batch = false;
  std::vector<v1::Event> events;
};

// A SOCK_SEQPACKET listener standing in for the collector; reads one connection.
class Receiver {
 public:
  explicit Receiver(const std::string& path) : path_(path) {
    listen_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    EXPECT_EQ(bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listen_, 16), 0);
  }
  ~Receiver() {
    if (conn_ >= 0) close(conn_);
    close(listen_);
    unlink(path_.c_str());
  }
  // Reads datagrams until done(all so far) is true or the peer closes (10 s at most
  // without any datagram). Returns false on a timeout.
  template <typename Done>
  bool ReadUntil(Done&& done) {
    if (conn_ < 0) {
      pollfd p{listen_, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) return false;
      conn_ = accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    std::vector<uint8_t> buf(ipc::kMaxDatagram + 1);
    while (!closed_ && !done(datagrams)) {
      pollfd p{conn_, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) return false;
      const ssize_t r = recv(conn_, buf.data(), buf.size(), 0);
      if (r <= 0) {
        closed_ = true;
        break;
      }
      Datagram d;
      d.size = static_cast<size_t>(r);
      d.batch = buf[0] == 0x0a;
      std::vector<ipc::FrameSlice> slices;
      EXPECT_TRUE(ipc::SplitFrame(buf.data(), d.size, &slices)) << "datagram " << datagrams.size();
      for (const auto& s : slices) {
        v1::Event e;
        EXPECT_TRUE(ipc::ParseFrame(s.data, s.size, &e)) << "datagram " << datagrams.size();
        d.events.push_back(e);
      }
      datagrams.push_back(std::move(d));
    }
    return true;
  }
  bool ReadAll() {
    return ReadUntil([](const std::vector<Datagram>&) { return false; });
  }
  std::vector<Datagram> datagrams;

 private:
  std::string path_;
  int listen_ = -1;
  int conn_ = -1;
  bool closed_ = false;
};

size_t EventCount(const std::vector<Datagram>& ds) {
  size_t n = 0;
  for (const auto& d : ds) n += d.events.size();
  return n;
}

// Every sequence number from 0 to the last exactly once, in order of arrival.
void ExpectCompleteInOrder(const std::vector<Datagram>& ds) {
  uint64_t next = 0;
  for (const auto& d : ds)
    for (const auto& e : d.events) {
      EXPECT_EQ(e.seq(), next) << "events arrive in sequence order, none missing";
      next = e.seq() + 1;
      EXPECT_EQ(e.dropped(), 0u);
    }
  EXPECT_GT(next, 0u);
}

bool IsSearchFor(const v1::Event& e, const std::string& name) {
  return e.has_search() && e.search().name() == name;
}
bool IsOpenOf(const v1::Event& e, const std::string& path) {
  return e.has_objopen() && e.objopen().path() == path;
}

TEST(Batching, TransactionsTravelWholeAndMissesAtOnce) {
  const auto dir = testing::ScratchDir("batching_wire");
  const std::string go = dir + "/go";
  Receiver rx(dir + "/s");
  const pid_t pid = Spawn({DLPROBE, "open", "libldscope_nowhere.so.7", "open", kLibA, "waitfile", go},
                          {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + dir + "/s"});
  // While the program waits: the failed dlopen's searches and the whole dlopen of
  // libfix_a (which maps libfix_b too) must already be here.
  bool saw_miss = false, saw_a = false, saw_b = false, saw_consistent_after_a = false;
  const bool in_time = rx.ReadUntil([&](const std::vector<Datagram>& ds) {
    if (ds.empty()) return false;
    const Datagram& d = ds.back();
    for (const auto& e : d.events) {
      saw_miss |= IsSearchFor(e, "libldscope_nowhere.so.7");
      saw_a |= IsOpenOf(e, kLibA);
      saw_b |= IsOpenOf(e, kLibB);
      saw_consistent_after_a |= saw_a && e.has_activity() && e.activity().kind() == v1::ACTIVITY_CONSISTENT;
    }
    return saw_miss && saw_consistent_after_a;
  });
  EXPECT_TRUE(in_time);
  EXPECT_TRUE(Running(pid)) << "the events came while the program still ran";
  EXPECT_TRUE(saw_miss && saw_a && saw_b && saw_consistent_after_a);
  testing::WriteFile(go, "");
  EXPECT_TRUE(rx.ReadAll());
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

  const auto& ds = rx.datagrams;
  ExpectCompleteInOrder(ds);
  EXPECT_LT(ds.size(), EventCount(ds)) << "fewer datagrams than events";
  bool transaction_in_one = false;
  for (const auto& d : ds) {
    bool add = false, a = false, b = false, consistent = false;
    for (const auto& e : d.events) {
      // The search for a library that is nowhere is not part of any transaction.
      if (IsSearchFor(e, "libldscope_nowhere.so.7")) {
        EXPECT_FALSE(d.batch) << "a dlopen that finds nothing is sent as it happens";
      }
      add |= e.has_activity() && e.activity().kind() == v1::ACTIVITY_ADD;
      a |= IsOpenOf(e, kLibA);
      b |= IsOpenOf(e, kLibB);
      consistent |= e.has_activity() && e.activity().kind() == v1::ACTIVITY_CONSISTENT;
    }
    if (add && a && b && consistent) {
      transaction_in_one = true;
      EXPECT_TRUE(d.batch);
      EXPECT_EQ(d.events.front().activity().kind(), v1::ACTIVITY_ADD);
      EXPECT_EQ(d.events.back().activity().kind(), v1::ACTIVITY_CONSISTENT);
    }
  }
  EXPECT_TRUE(transaction_in_one) << "ADD, both objects and CONSISTENT in one datagram";
  EXPECT_TRUE(ds.back().events.back().has_exit()) << "the exit event comes last";
}

// When a library the program needs is missing, ld.so prints its error and _exits in the
// middle of the start-up transaction: start-up events are never held, so the searches
// that explain the failure are all there.
TEST(Batching, StartupThatFailsIsStreamed) {
  const auto dir = testing::ScratchDir("batching_startup");
  Receiver rx(dir + "/s");
  const pid_t pid = Spawn({FIXTURES "/bin/needs_gone"}, {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + dir + "/s"});
  EXPECT_TRUE(rx.ReadAll());
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 127) << st;
  ExpectCompleteInOrder(rx.datagrams);
  size_t searches = 0;
  bool orphan = false;
  for (const auto& d : rx.datagrams)
    for (const auto& e : d.events) {
      searches += IsSearchFor(e, "libfix_gone.so") || (e.has_search() && e.search().name().empty());
      orphan |= IsOpenOf(e, FIXTURES "/lib/libfix_orphan.so");
    }
  EXPECT_TRUE(orphan);
  EXPECT_GE(searches, 3u) << "the search for libfix_gone.so and its candidates";
  bool gone_searched = false;
  for (const auto& d : rx.datagrams)
    for (const auto& e : d.events) gone_searched |= IsSearchFor(e, "libfix_gone.so");
  EXPECT_TRUE(gone_searched);
}

// A transaction bigger than one batch (a dlopen whose dependency is searched for in 800
// empty directories of LD_LIBRARY_PATH) goes out as several full batches, in order, in
// both transports.
TEST(Batching, BigTransactionFillsSeveralBatches) {
  const auto dir = testing::ScratchDir("batching_big");
  std::string path;
  for (int i = 0; i < 800; ++i) {
    const std::string d = dir + "/nowhere/some/long/directory/name/" + std::to_string(i);
    std::filesystem::create_directories(d);
    path += (i ? ":" : "") + d;
  }
  Receiver rx(dir + "/s");
  const pid_t pid = Spawn({DLPROBE, "open", kLibA}, {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + dir + "/s",
                                                      "LD_LIBRARY_PATH=" + path});
  EXPECT_TRUE(rx.ReadAll());
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ExpectCompleteInOrder(rx.datagrams);
  size_t big = 0, candidates = 0;
  for (const auto& d : rx.datagrams) {
    EXPECT_LE(d.size, ipc::kMaxDatagram);
    big += d.batch && d.size > 24 * 1024;
    for (const auto& e : d.events) candidates += e.has_search() && e.search().name().empty();
  }
  EXPECT_GE(candidates, 2 * 800u) << "libc.so.6 at start-up, libfix_b.so in the dlopen";
  EXPECT_GE(big, 2u) << "the held events were sent whenever the batch was full";

  // The same through LDSCOPE_DIR: one file, every record an event, nothing missing.
  const std::string tdir = dir + "/traces";
  std::filesystem::create_directory(tdir);
  const auto r = RunCmd({DLPROBE, "open", kLibA},
                        {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_DIR=" + tdir, "LD_LIBRARY_PATH=" + path});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto set = store::LoadTraces({tdir});
  ASSERT_EQ(set.files.size(), 1u);
  const auto& f = set.files[0];
  ASSERT_TRUE(f.ok()) << f.problem->message;
  std::set<uint64_t> seqs;
  size_t dir_candidates = 0;
  for (const auto& e : f.events) {
    seqs.insert(e.seq());
    dir_candidates += e.has_search() && e.search().candidate().find("/nowhere/") != std::string::npos;
  }
  EXPECT_EQ(seqs.size(), f.events.size());
  EXPECT_EQ(*seqs.rbegin() + 1, f.events.size()) << "no gaps";
  EXPECT_GE(dir_candidates, 2 * 800u);
  EXPECT_TRUE(f.events.back().has_exit() || std::any_of(f.events.begin(), f.events.end(),
                                                         [](const v1::Event& e) { return e.has_exit(); }));
}

// A thread's dlopen is stopped (by a second auditor, which `ldscope run` puts before
// its own) in the middle of its transaction, with ldscope's events of it (ADD and the
// searches) held; the main thread forks meanwhile. The child's stream
// is its own and complete; the held events are sent once, by the parent.
TEST(Batching, ForkedChildDoesNotSendItsParentsHeldEvents) {
  const auto dir = testing::ScratchDir("batching_fork");
  const std::string trace = dir + "/t.ldscope", mark = dir + "/held", go = dir + "/go";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", DLPROBE,
                         "bgopen", kLibB, "waitfile", mark, "fork", "mark", go, "join"},
                        {"LD_AUDIT=" + kHoldAudit, "HOLD_AUDIT_NAME=/libfix_b.so",
                         "HOLD_AUDIT_MARK=" + mark, "HOLD_AUDIT_GO=" + go});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("child\nbgopen: not ours\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parent\nbgopen: ok\n"), std::string::npos) << r.out;
  const auto t = store::ReadTraceFile(trace);
  ASSERT_TRUE(t.ok()) << t.problem->message;
  std::map<uint32_t, std::vector<const v1::Event*>> by_pid;
  for (const auto& e : t.events)
    if (!e.has_collector() && !e.has_mount_facts() && !e.has_owner_facts()) by_pid[e.pid()].push_back(&e);
  ASSERT_EQ(by_pid.size(), 2u) << "the parent and the child";
  int parents = 0, children = 0;
  for (auto& [pid, evs] : by_pid) {
    std::sort(evs.begin(), evs.end(), [](const v1::Event* a, const v1::Event* b) { return a->seq() < b->seq(); });
    for (size_t i = 0; i < evs.size(); ++i) EXPECT_EQ(evs[i]->seq(), i) << "pid " << pid;
    ASSERT_TRUE(evs.front()->has_process_start());
    const bool child = evs.front()->process_start().reason() == v1::START_FORK;
    (child ? children : parents) += 1;
    int opens_of_b = 0;
    for (const auto* e : evs) {
      EXPECT_EQ(e->dropped(), 0u);
      opens_of_b += IsOpenOf(*e, kLibB);
      if (child) {
        EXPECT_FALSE(e->has_search() && e->search().name() == kLibB) << "the parent's";
      }
    }
    EXPECT_EQ(opens_of_b, child ? 0 : 1) << "pid " << pid;
    EXPECT_TRUE(evs.back()->has_exit()) << "pid " << pid;
  }
  EXPECT_EQ(parents, 1);
  EXPECT_EQ(children, 1);
  // The fork did happen inside the transaction, with its events held: the parent's
  // ADD of it is before the child's parent_seq_at_fork, its CONSISTENT after.
  EXPECT_TRUE(std::filesystem::exists(mark)) << "the second auditor stopped the dlopen";
  uint64_t fork_seq = 0, add_seq = 0, open_seq = 0, consistent_seq = 0;
  for (auto& [pid, evs] : by_pid) {
    if (evs.front()->process_start().reason() == v1::START_FORK) {
      fork_seq = evs.front()->process_start().parent_seq_at_fork();
      continue;
    }
    for (const auto* e : evs) {
      const bool activity = e->has_activity();
      if (open_seq == 0 && activity && e->activity().kind() == v1::ACTIVITY_ADD) add_seq = e->seq();
      if (IsOpenOf(*e, kLibB)) open_seq = e->seq();
      if (open_seq != 0 && consistent_seq == 0 && activity &&
          e->activity().kind() == v1::ACTIVITY_CONSISTENT)
        consistent_seq = e->seq();
    }
  }
  EXPECT_GT(add_seq, 0u);
  EXPECT_LT(add_seq, fork_seq);
  EXPECT_GT(consistent_seq, fork_seq);
}

}  // namespace
}  // namespace ldscope
