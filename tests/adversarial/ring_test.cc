// The event ring between a traced process and the collector (audit/ring.h): start-up
// events survive a SIGKILL in the middle of start-up; threads that dlopen and dlclose at
// once (and fork meanwhile) lose nothing; a program that closes our descriptor goes on
// being traced; a ring that breaks the layout is a counted bad client, never a crash or
// a hang of the collector, and the others' traces beside it are whole.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "ldscope_proto/events.pb.h"
#include "ring.h"
#include "support/test_support.h"

extern char** environ;

namespace ldscope {
namespace {

using testing::Collector;
using testing::RunCmd;

const std::string kHoldAudit = FIXTURES "/audit/libhold_audit.so";
const std::string kRing = "LDSCOPE_TRANSPORT=ring";  // whichever transport is the default

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const auto& s : set) env.push_back(s);
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

bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 2000; ++i) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// SIGKILL while ld.so maps the program's libraries (a second auditor holds it inside
// libc.so.6's objopen): what the process recorded before is in the trace, whole.
TEST(Ring, SigkillInTheMiddleOfStartupKeepsItsEvents) {
  const auto dir = testing::ScratchDir("ring_sigkill");
  Collector c(dir);
  ASSERT_TRUE(std::filesystem::exists(c.socket));
  const std::string mark = dir + "/held", go = dir + "/go";
  const pid_t pid = Spawn({DLPROBE, "open", FIXTURES "/lib/libfix_a.so"},
                          {"LD_AUDIT=" AUDIT_LIB ":" + kHoldAudit, "LDSCOPE_SOCKET=" + c.socket, kRing,
                           "HOLD_AUDIT_NAME=libc.so.6", "HOLD_AUDIT_MARK=" + mark, "HOLD_AUDIT_GO=" + go});
  // A held process never exits by itself: killed on the way out whatever fails first,
  // so that a failure is reported rather than the collector waiting for it.
  struct KillOnExit {
    pid_t pid;
    ~KillOnExit() {
      if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
    }
  } guard{pid};
  ASSERT_TRUE(WaitForFile(mark)) << "the held auditor did not mark " << mark;
  kill(pid, SIGKILL);
  guard.pid = -1;
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  c.Stop();
  const auto t = testing::TimelineOf({c.trace});
  const auto probes = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(probes.size(), 1u);
  const auto& p = *probes[0];
  EXPECT_FALSE(p.exited());
  EXPECT_EQ(p.missing_seqs(), 0u);
  EXPECT_EQ(p.dropped(), 0u);
  bool libc = false, exe = false, searched_libc = false;
  for (const auto& e : p.entries()) {
    if (!e.has_load()) continue;
    const std::string& path = e.load().object().path();
    if (path.size() > 10 && path.compare(path.size() - 10, 10, "/libc.so.6") == 0) {
      libc = true;
      searched_libc = e.load().requested_name() == "libc.so.6" && e.load().tried_size() > 0;
    }
    exe |= e.load().reason() == v1::LOAD_EXECUTABLE;
  }
  EXPECT_TRUE(exe) << "the executable's objopen";
  EXPECT_TRUE(libc) << "libc.so.6's objopen, the last event before the kill";
  EXPECT_TRUE(searched_libc) << "the search for libc.so.6 that found it";
  EXPECT_EQ(p.start_reason(), v1::START_EXEC);
}

// Five threads dlopen and dlclose at once, each its own library, 400 cycles each, and
// one forks half-way, between the others' cycles (its child makes one more cycle of its
// library): every event of both processes arrives, none lost.
TEST(Ring, ThreadsThatDlopenAtOnceLoseNothing) {
  const auto dir = testing::ScratchDir("ring_threads");
  const std::string trace = dir + "/t.ldscope";
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run",   "-q",      "--no-report", "-o", trace,
                                  "--",        DLPROBE, "tcycles", "5",           "400"};
  for (int i = 0; i < 5; ++i) cmd.push_back(FIXTURES "/lib/threads/libfix_t" + std::to_string(i) + ".so");
  const auto r = RunCmd(cmd, {kRing}, {}, 300);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out, "tcycles 5: 2000 ok\n");
  const auto t = testing::TimelineOf({trace});
  const auto probes = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(probes.size(), 2u) << "the program and its forked child";
  for (const auto* p : probes) {
    SCOPED_TRACE(p->pid());
    EXPECT_EQ(p->missing_seqs(), 0u);
    EXPECT_EQ(p->dropped(), 0u);
    EXPECT_TRUE(p->exited());
    int loads = 0, unloads = 0;
    for (const auto& e : p->entries()) {
      loads += e.has_load() && e.load().object().path().find("/threads/libfix_t") != std::string::npos;
      unloads += e.has_unload() && !e.unload().at_exit() &&
                 e.unload().object().path().find("/threads/libfix_t") != std::string::npos;
    }
    const int want = p->start_reason() == v1::START_FORK ? 1 : 2000;
    EXPECT_EQ(loads, want);
    EXPECT_EQ(unloads, want);
  }
}

// A program that closes every descriptor it did not open (a daemon's habit) closes our
// connection: the collector reads the ring to its end and lets it go, and the program's
// next event goes on a new connection and ring.
TEST(Ring, ProgramThatClosesOurDescriptorIsStillTraced) {
  const auto dir = testing::ScratchDir("ring_closed");
  const std::string trace = dir + "/t.ldscope";
  // Descriptor 512 is ours (transport.cc, kHighFd).
  const auto r =
      RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", DLPROBE, "open", FIXTURES "/lib/libfix_a.so",
              "closefd", "512", "sleep", "50", "open", FIXTURES "/lib/libfix_orphan.so"},
             {kRing});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = testing::TimelineOf({trace});
  const auto probes = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(probes.size(), 1u);
  bool a = false, orphan = false;
  for (const auto& line : testing::LoadLines(*probes[0])) {
    a |= line.find("libfix_a.so") != std::string::npos;
    orphan |= line.find("libfix_orphan.so") != std::string::npos;
  }
  EXPECT_TRUE(a);
  EXPECT_TRUE(orphan) << "the load after the close arrived, on a new connection";
  EXPECT_TRUE(probes[0]->exited());
}

// --- rogue rings ---

// A ring as the audit library makes it (sealed unless told otherwise), mapped here.
struct RogueRing {
  int memfd = -1;
  uint8_t* mem = nullptr;
  explicit RogueRing(bool seal = true, size_t bytes = ring::kFileBytes) {
    memfd = memfd_create("rogue", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_EQ(ftruncate(memfd, static_cast<off_t>(bytes)), 0);
    if (seal) {
      EXPECT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    }
    mem = static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
    auto* h = header();
    h->magic = ring::kMagic;
    h->version = ring::kVersion;
    h->capacity = ring::kCapacity;
  }
  ring::Header* header() { return reinterpret_cast<ring::Header*>(mem); }
  // Appends a record of these bytes (with this length word) and publishes it.
  void Put(const std::string& bytes, uint32_t len_word) {
    auto* h = header();
    uint8_t* data = mem + ring::kHeaderBytes;
    const uint64_t at = h->head % ring::kCapacity;
    std::memcpy(data + at, &len_word, 4);
    std::memcpy(data + at + 4, bytes.data(), bytes.size());
    __atomic_store_n(&h->head, h->head + ring::RecordBytes(bytes.size()), __ATOMIC_RELEASE);
  }
  void Put(const std::string& bytes) { Put(bytes, static_cast<uint32_t>(bytes.size())); }
  void Announce(int sock, int kind = ring::kAnnounce) {
    uint8_t msg[ring::kControlBytes];
    ring::ControlDatagram(static_cast<uint8_t>(kind), msg);
    iovec iov{msg, sizeof msg};
    union {
      cmsghdr align;
      char bytes[CMSG_SPACE(sizeof(int))];
    } control{};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.bytes;
    mh.msg_controllen = sizeof control.bytes;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &memfd, sizeof memfd);
    EXPECT_EQ(sendmsg(sock, &mh, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof msg));
  }
};

std::string StartEvent(uint32_t pid) {
  v1::Event e;
  e.set_pid(pid);
  e.mutable_process_start()->set_exe("/rogue");
  e.mutable_process_start()->set_image_start_ns(pid);
  return e.SerializeAsString();
}

TEST(Ring, RogueRingsAreDisconnectedOthersUnharmed) {
  const auto dir = testing::ScratchDir("ring_rogue");
  Collector c(dir);
  ASSERT_TRUE(std::filesystem::exists(c.socket));
  std::vector<int> bad;
  std::vector<std::unique_ptr<RogueRing>> rings;
  auto rogue = [&](std::unique_ptr<RogueRing> r, const std::function<void(RogueRing&)>& write) {
    const int fd = testing::ConnectSeqpacket(c.socket);
    r->Announce(fd);
    write(*r);
    bad.push_back(fd);
    rings.push_back(std::move(r));
  };
  // Not sealed against shrinking: could be cut under the collector's mapping.
  rogue(std::make_unique<RogueRing>(false), [](RogueRing&) {});
  // Not the ring's size.
  rogue(std::make_unique<RogueRing>(true, 8192), [](RogueRing&) {});
  // A valid start, then a length past any record.
  rogue(std::make_unique<RogueRing>(), [](RogueRing& r) {
    r.Put(StartEvent(910001));
    r.Put("xxxxxxxx", 0xfffffff0u);
  });
  // A head more than a ring ahead of what was read.
  rogue(std::make_unique<RogueRing>(),
        [](RogueRing& r) { __atomic_store_n(&r.header()->head, uint64_t{1} << 40, __ATOMIC_RELEASE); });
  // A zero length word.
  rogue(std::make_unique<RogueRing>(), [](RogueRing& r) {
    r.Put(StartEvent(910003));
    r.Put("", 0);
  });
  // A record that is no event.
  rogue(std::make_unique<RogueRing>(), [](RogueRing& r) {
    r.Put(StartEvent(910004));
    r.Put(std::string("\x0a\xff\xff\xff\xff\x0f garbage", 14));
  });
  {  // A second ring on the same connection.
    const int fd = testing::ConnectSeqpacket(c.socket);
    auto first = std::make_unique<RogueRing>();
    first->Announce(fd);
    auto second = std::make_unique<RogueRing>();
    second->Announce(fd);
    bad.push_back(fd);
    rings.push_back(std::move(first));
    rings.push_back(std::move(second));
  }
  for (int fd : bad) {
    EXPECT_TRUE(testing::ServerHungUp(fd));
    close(fd);
  }
  // A ring whose writer keeps its connection open and writes nothing more: no hang.
  const int quiet = testing::ConnectSeqpacket(c.socket);
  RogueRing ok;
  ok.Announce(quiet);
  ok.Put(StartEvent(910009));
  const auto r = RunCmd({DLPROBE, "open", FIXTURES "/lib/libfix_b.so", "close"},
                        {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + c.socket, kRing});
  EXPECT_EQ(r.code, 0);
  const std::string summary = c.Stop();
  close(quiet);
  EXPECT_NE(summary.find("7 bad clients disconnected"), std::string::npos) << summary;
  const auto t = testing::TimelineOf({c.trace});
  const auto probes = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0]->missing_seqs(), 0u);
  EXPECT_TRUE(probes[0]->exited());
  EXPECT_EQ(testing::ByExe(t, "/rogue").size(), 4u) << "the valid starts before the damage are kept";
}

}  // namespace
}  // namespace ldscope
