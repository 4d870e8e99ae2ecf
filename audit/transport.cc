// See transport.h. Raw system calls only (sys.h): no libc, no heap, no stdio.
#include "transport.h"

#include <fcntl.h>
#include <poll.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "encode.h"
#include "process.h"
#include "sys.h"
#include "wire.h"

namespace ldscope::audit {
namespace {

// Our descriptor never takes a number the program could get itself: it is moved to
// kHighFd, or, under a descriptor limit of kHighFd or less, to the limit's last number,
// which leaves the program every number below it. A limit that would leave the program
// fewer than kMinProgramFds numbers leaves no room: the image is not traced (a
// program run under `ulimit -n 4` needs every number it has, ld.so's opens included).
constexpr long kHighFd = 512;
constexpr long kMinProgramFds = 64;

bool CopyStr(char* dst, size_t cap, const char* src) {
  const size_t n = std::strlen(src);
  if (n + 1 > cap) return false;
  std::memcpy(dst, src, n + 1);
  return true;
}

// Appends decimal v at p; returns the new end.
char* PutDec(char* p, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = tmp[--n];
  return p;
}

// This process's user, or root.
bool OwnUser(uint32_t uid) {
  return uid == 0 || uid == static_cast<uint32_t>(sys::Getuid()) || uid == static_cast<uint32_t>(sys::Geteuid());
}

}  // namespace

bool TrustedSocketDir(char* path) {
  char* slash = std::strrchr(path, '/');
  struct stat st;
  long r;
  if (slash == nullptr) {
    r = sys::Stat(".", &st);
  } else if (slash == path) {
    r = sys::Stat("/", &st);
  } else {
    *slash = '\0';  // the directory's path, for a moment: no copy of up to 4 KiB
    r = sys::Stat(path, &st);
    *slash = '/';
  }
  return r == 0 && S_ISDIR(st.st_mode) && OwnUser(st.st_uid) &&
         ((st.st_mode & S_IWOTH) == 0 || (st.st_mode & S_ISVTX) != 0);
}

bool TrustedPeer(int fd) {
  struct {
    int32_t pid;
    uint32_t uid, gid;
  } cred{};  // struct ucred
  unsigned len = sizeof cred;
  return sys::Getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred && OwnUser(cred.uid);
}

// The inode in /proc/self/ns/pid's link text "pid:[4026531836]" (0: unknown).
uint64_t PidNamespaceIno() {
  char link[64];
  const long n = sys::Readlink("/proc/self/ns/pid", link, sizeof link - 1);
  uint64_t ino = 0;
  for (long i = 0; i < n; ++i)
    if (link[i] >= '0' && link[i] <= '9') ino = ino * 10 + static_cast<uint64_t>(link[i] - '0');
  return ino;
}

bool Transport::Configure(const char* socket_path, const char* dir, bool datagrams) {
  if (socket_path != nullptr && *socket_path != '\0' &&
      CopyStr(target_, sizeof target_, socket_path)) {
    mode_ = Mode::kSocket;
    datagrams_ = datagrams;
    return true;
  }
  if (dir != nullptr && *dir != '\0' && std::strlen(dir) + 64 < sizeof target_ &&
      CopyStr(target_, sizeof target_, dir)) {
    mode_ = Mode::kDir;
    return true;
  }
  mode_ = Mode::kNone;
  return false;
}

bool Transport::Adopt(int fd) {
  sys::Rlimit64 lim{};
  const uint64_t limit = sys::Getrlimit(RLIMIT_NOFILE, &lim) == 0 ? lim.cur : 0;
  const long lowest = limit > static_cast<uint64_t>(kHighFd) ? kHighFd : static_cast<long>(limit) - 1;
  const long high = lowest >= kMinProgramFds ? sys::Fcntl(fd, F_DUPFD_CLOEXEC, lowest) : -EMFILE;
  if (high >= 0) {
    sys::Close(fd);
    fd = static_cast<int>(high);
  } else {
    // Every number left is one the program could get: this descriptor stays only for
    // the start event that says so (Open returns false, no_room() says why).
    no_room_ = true;
    fd_limit_ = limit;
    error_ = EMFILE;
  }
  struct stat st;
  if (sys::Fstat(fd, &st) != 0) {
    sys::Close(fd);
    return false;
  }
  fd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  dead_ = false;
  stalled_ = false;
  return !no_room_;
}

bool Transport::OpenSocket() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(target_) >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, target_, std::strlen(target_) + 1);
  if (!TrustedSocketDir(target_)) {
    error_ = EACCES;
    return false;
  }
  const long sock = sys::Socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) {
    error_ = static_cast<int>(-sock);
    return false;
  }
  const int fd = static_cast<int>(sock);
  // Datagrams of events need a large queue; a ring's connection carries a few small ones
  // (a ring that cannot be made gets the default queue, a few hundred KiB).
  if (datagrams_) {
    const int sndbuf = 1 << 20;
    sys::Setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  }
  // A full accept backlog answers EAGAIN at once on a non-blocking AF_UNIX connect:
  // retry for a bounded 100 ms.
  for (int attempt = 0;; ++attempt) {
    const long r = sys::Connect(fd, &addr, sizeof addr);
    if (r == 0) break;
    if (r != -EAGAIN || attempt >= 100) {
      error_ = static_cast<int>(-r);
      sys::Close(fd);
      return false;
    }
    sys::Poll(nullptr, 0, 1);
  }
  // Whoever listens is this user's or root's, or nothing at all is sent.
  if (!TrustedPeer(fd)) {
    error_ = EACCES;
    sys::Close(fd);
    return false;
  }
  const bool ours = Adopt(fd);
  if (ours && !datagrams_) OpenRing();  // else datagrams on the connection
  return ours;
}

namespace {
uint64_t MonoNs() {
  timespec ts{};
  proc::ClockGettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

// The memfd is sealed at its size, so that the collector's mapping of it can never lose
// its pages under it (SIGBUS); it is ours for the few system calls it takes to hand it
// over (a number the program could get, for that moment only, as the socket's before
// Adopt), then closed: the mapping and the collector's copy keep it.
bool Transport::OpenRing() {
  const long m = sys::MemfdCreate("ldscope-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m < 0) return false;
  const int mfd = static_cast<int>(m);
  void* p = nullptr;
  bool ok = sys::Ftruncate(mfd, static_cast<long>(ring::kFileBytes)) == 0 &&
            sys::Fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0;
  if (ok) {
    p = sys::Mmap(nullptr, ring::kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    ok = !sys::MmapFailed(p);
    if (!ok) p = nullptr;
  }
  if (ok) {
    auto* h = static_cast<ring::Header*>(p);
    h->magic = ring::kMagic;
    h->version = ring::kVersion;
    h->capacity = static_cast<uint32_t>(ring::kCapacity);
    uint8_t msg[ring::kControlBytes];
    ring::ControlDatagram(ring::kAnnounce, msg);
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
    std::memcpy(CMSG_DATA(c), &mfd, sizeof mfd);
    long r;
    do {
      r = sys::Sendmsg(fd_, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (r == -EINTR);
    ok = r == static_cast<long>(sizeof msg);
  }
  sys::Close(mfd);
  if (!ok) {
    if (p != nullptr) sys::Munmap(p, ring::kFileBytes);
    return false;
  }
  ring_ = static_cast<ring::Header*>(p);
  ring_data_ = static_cast<uint8_t*>(p) + ring::kHeaderBytes;
  ring_head_ = 0;
  ring_probed_ns_ = MonoNs();
  ring_records_ = 0;
  return true;
}

void Transport::CloseRing() {
  if (ring_ == nullptr) return;
  sys::Munmap(ring_, ring::kFileBytes);
  ring_ = nullptr;
  ring_data_ = nullptr;
}

void Transport::Wake() {
  if (__atomic_exchange_n(&ring_->wake, 1u, __ATOMIC_SEQ_CST) != 0) return;  // one is pending
  // Never to a descriptor that is no longer ours: then the connection is gone for us,
  // as for a dead collector (the next event opens a new one).
  if (!StillOurs()) {
    dead_ = true;
    return;
  }
  uint8_t msg[ring::kControlBytes];
  ring::ControlDatagram(ring::kWake, msg);
  long r;
  do {
    r = sys::Send(fd_, msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (r == -EINTR);
  // EAGAIN: the collector's queue is full of our wake-ups; it reads the ring anyway.
  if (r < 0 && r != -EAGAIN && r != -ENOBUFS) dead_ = true;  // EPIPE, ECONNRESET: gone
}

void Transport::ProbeIfUnvisited() {
  constexpr int64_t kProbeNs = int64_t{ring::kProbeMs} * 1000000;
  const uint64_t now = MonoNs();
  // Its clock is ours, unless it runs in another time namespace: then an age that is
  // negative by more than the probe interval is no age, and probes go at most every
  // kProbeMs.
  const int64_t age = static_cast<int64_t>(now - __atomic_load_n(&ring_->visited_ns, __ATOMIC_RELAXED));
  if ((age <= kProbeNs && age >= -kProbeNs) || static_cast<int64_t>(now - ring_probed_ns_) < kProbeNs) return;
  ring_probed_ns_ = now;
  __atomic_store_n(&ring_->wake, 0u, __ATOMIC_RELAXED);  // a probe, whatever is pending
  Wake();
}

uint64_t Transport::UnreadRecords() const {
  if (ring_ == nullptr) return 0;
  const uint64_t taken = __atomic_load_n(&ring_->tail_records, __ATOMIC_ACQUIRE);
  return taken <= ring_records_ ? ring_records_ - taken : 0;
}

bool Transport::Usable() {
  if (fd_ < 0 || dead_) return false;
  if (ring_ == nullptr) return StillOurs();
  if (__atomic_load_n(&ring_->detached, __ATOMIC_ACQUIRE) != 0) return false;
  ProbeIfUnvisited();
  return !dead_;
}

bool Transport::WaitForRoom(uint64_t need) {
  if (stalled_) return false;  // already waited once in this stall: drop at once
  Wake();
  const uint64_t deadline = MonoNs() + static_cast<uint64_t>(kSendWaitMs) * 1000000ull;
  while (!dead_) {
    const uint64_t used = ring_head_ - __atomic_load_n(&ring_->tail, __ATOMIC_ACQUIRE);
    if (used > ring::kCapacity) return false;
    if (ring::kCapacity - used >= need) return true;
    if (__atomic_load_n(&ring_->detached, __ATOMIC_ACQUIRE) != 0 || MonoNs() >= deadline) return false;
    sys::Poll(nullptr, 0, 1);
  }
  return false;
}

Transport::Result Transport::RingDeliver(const uint8_t* data, size_t len) {
  if (len > ring::kMaxRecord) return Result::kDropped;
  const uint64_t need = ring::RecordBytes(len);
  uint64_t used = ring_head_ - __atomic_load_n(&ring_->tail, __ATOMIC_ACQUIRE);
  if (used > ring::kCapacity) {
    dead_ = true;  // no reader's count: a new connection and ring at the next event
    return Result::kDropped;
  }
  if (ring::kCapacity - used < need) {
    if (!WaitForRoom(need)) {
      stalled_ = true;
      return Result::kDropped;
    }
    used = ring_head_ - __atomic_load_n(&ring_->tail, __ATOMIC_ACQUIRE);
  }
  const size_t at = static_cast<size_t>(ring_head_ % ring::kCapacity);
  const uint32_t n = static_cast<uint32_t>(len);
  std::memcpy(ring_data_ + at, &n, sizeof n);
  const size_t pos = at + sizeof n;  // at is 8-aligned: the length word never wraps
  const size_t first = len < ring::kCapacity - pos ? len : ring::kCapacity - pos;
  std::memcpy(ring_data_ + pos, data, first);
  std::memcpy(ring_data_, data + first, len - first);
  ring_head_ += need;
  ++ring_records_;
  __atomic_store_n(&ring_->head, ring_head_, __ATOMIC_RELEASE);
  stalled_ = false;
  if (used + need >= ring::kWakeAt) Wake();
  return Result::kSent;
}

bool Transport::OpenFile(uint32_t pid, uint64_t image_start_ns) {
  char path[sizeof target_ + 64];
  char* p = path;
  const size_t n = std::strlen(target_);
  std::memcpy(p, target_, n);
  p += n;
  *p++ = '/';
  p = PutDec(p, pid);
  *p++ = '-';
  p = PutDec(p, image_start_ns);
  std::memcpy(p, ".ldscope", sizeof ".ldscope");
  const long opened = sys::Open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (opened < 0) {
    error_ = static_cast<int>(-opened);
    return false;
  }
  const int fd = static_cast<int>(opened);
  // The file starts with a TraceHeader, as every trace file does.
  uint8_t buf[kPrefixRoom + 512];
  wire::Writer w(buf + kPrefixRoom, sizeof buf - kPrefixRoom);
  // LDSCOPE_HOST labels the traces of one node (containers' host names are often all
  // alike); else the host name.
  char host[256] = {};
  const char* label = proc::Getenv("LDSCOPE_HOST");
  if (label != nullptr && *label != '\0') {
    for (size_t i = 0; i + 1 < sizeof host && label[i] != '\0'; ++i) host[i] = label[i];
  } else {
    struct utsname u;
    if (sys::Uname(&u) == 0)
      for (size_t i = 0; i + 1 < sizeof host && i < sizeof u.nodename && u.nodename[i] != '\0'; ++i)
        host[i] = u.nodename[i];
  }
  timespec ts{};
  proc::ClockGettime(CLOCK_REALTIME, &ts);
  EncodeTraceHeader(w, host, glibc_version_,
                    static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec, PidNamespaceIno());
  const bool ours = Adopt(fd);
  if (fd_ < 0) return false;
  return Send(buf + kPrefixRoom, w.size()) == Result::kSent && ours;
}

bool Transport::Open(uint32_t pid, uint64_t image_start_ns) {
  fd_ = -1;
  error_ = 0;
  if (no_room_) {  // the image is not traced: its start event said so
    error_ = EMFILE;
    return false;
  }
  switch (mode_) {
    case Mode::kSocket: return OpenSocket();
    case Mode::kDir: return OpenFile(pid, image_start_ns);
    case Mode::kNone: return false;
  }
  return false;
}

bool Transport::StillOurs() const {
  if (fd_ < 0) return false;
  struct stat st;
  return sys::Fstat(fd_, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

void Transport::Abandon() {
  CloseRing();
  if (StillOurs()) sys::Close(fd_);
  fd_ = -1;
}

Transport::Result Transport::Send(uint8_t* data, size_t len) {
  if (mode_ != Mode::kDir) return Deliver(data, len);
  // A file record: the length in front (one write() per record or batch: O_APPEND
  // keeps them whole even with threads).
  uint8_t prefix[kPrefixRoom];
  const size_t plen = static_cast<size_t>(wire::PutVarint(prefix, len) - prefix);
  uint8_t* start = data - plen;
  std::memcpy(start, prefix, plen);
  return Deliver(start, plen + len);
}

Transport::Result Transport::SendBatch(const uint8_t* data, size_t len) {
  return Deliver(data, len);
}

size_t Transport::FrameInBatch(uint8_t* out, size_t event_len) const {
  uint8_t* p = out;
  constexpr uint64_t kTag = wire::Tag(field::event_batch::kEvent, wire::kLengthDelimited);
  static_assert(kTag < 0x80, "a one-byte tag");
  if (mode_ == Mode::kSocket) *p++ = kTag;
  p = wire::PutVarint(p, event_len);
  return static_cast<size_t>(p - out);
}

Transport::Result Transport::Deliver(const uint8_t* data, size_t len) {
  if (fd_ < 0 || dead_) return Result::kDropped;
  if (ring_ != nullptr) return RingDeliver(data, len);
  if (mode_ == Mode::kDir) {
    const long r = sys::Write(fd_, data, len);
    if (r == static_cast<long>(len)) return Result::kSent;
    if (r >= 0) dead_ = true;  // a short write would leave a torn record: stop here
    return Result::kDropped;
  }
  timespec deadline{};
  bool have_deadline = false;
  for (;;) {
    const long r = sys::Send(fd_, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      stalled_ = false;
      return Result::kSent;
    }
    if (r == -EINTR) continue;
    if (r != -EAGAIN && r != -ENOBUFS) {
      dead_ = true;  // EPIPE, ECONNRESET, ...: the collector is gone
      return Result::kDropped;
    }
    if (stalled_) break;  // already waited once in this stall: drop at once
    timespec now{};
    proc::ClockGettime(CLOCK_MONOTONIC, &now);
    if (!have_deadline) {
      deadline = now;
      deadline.tv_sec += kSendWaitMs / 1000;
      deadline.tv_nsec += (kSendWaitMs % 1000) * 1000000L;
      if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
      }
      have_deadline = true;
    }
    const long left_ms = (deadline.tv_sec - now.tv_sec) * 1000 + (deadline.tv_nsec - now.tv_nsec) / 1000000;
    if (left_ms <= 0) break;
    pollfd pfd{fd_, POLLOUT, 0};
    const long p = sys::Poll(&pfd, 1, static_cast<int>(left_ms));
    if (p < 0 && p != -EINTR) break;
  }
  stalled_ = true;
  return Result::kDropped;
}

}  // namespace ldscope::audit
