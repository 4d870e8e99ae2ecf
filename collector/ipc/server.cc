// See server.h.
#include "ipc/server.h"

#include "ipc/pyhook.h"

#include "wire.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <set>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

namespace ldscope::ipc {
namespace {

// EventBatch's field `event`, length-delimited (0x0a): no Event starts with it.
constexpr uint64_t kBatchEntryTag =
    wire::Tag(v1::EventBatch::kEventFieldNumber, wire::kLengthDelimited);
static_assert(kBatchEntryTag < 0x80, "a one-byte tag");

// How long accepting pauses after the descriptor limit was hit, unless a connection
// closes first. A level-triggered listener with a full descriptor table would otherwise
// wake epoll at once, forever (100% CPU, nothing done).
constexpr int kAcceptRetryMs = 50;

// A wake-up that found only a few datagrams waits this long before the next epoll_wait,
// so that what traced processes send meanwhile is read in one go: a traced /bin/true
// sends about eight datagrams over half a millisecond, and waking for each one was most
// of the collector's time (context switches), paid once per process in a fork-heavy
// job. Traced processes never wait for the collector (they send without blocking, into
// a queue of thousands of datagrams per connection), so this costs them nothing.
constexpr long kCoalesceNs = 1000000;
constexpr uint64_t kCoalesceBelow = 64;  // datagrams read by one wake-up

// Descriptors the collector may hold besides its connections (the listener, epoll, the
// trace, the command's pipes, the standard streams): with fewer connections than the
// limit less this, a ring's descriptor always finds a free slot.
constexpr uint64_t kSpareMargin = 64;

uint64_t DescriptorLimit() {
  rlimit r{};
  return getrlimit(RLIMIT_NOFILE, &r) == 0 ? static_cast<uint64_t>(r.rlim_cur) : 0;
}

// What the process runs now, "" when it is gone (or a zombie: no mm, no exe link).
std::string ExeOf(pid_t pid) {
  if (pid <= 0) return "";
  char buf[4096];
  const ssize_t n = readlink(fmt::format("/proc/{}/exe", pid).c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

Server::~Server() { Shutdown(); }

void Server::Shutdown() {
  for (auto& [fd, c] : conns_) close(fd);
  conns_.clear();
  open_rings_ = 0;
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    unlink(path_.c_str());
  }
  if (epoll_fd_ >= 0) {
    close(epoll_fd_);
    epoll_fd_ = -1;
  }
  if (spare_fd_ >= 0) {
    close(spare_fd_);
    spare_fd_ = -1;
  }
}

Status Server::Listen(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    return Error{fmt::format("socket path too long ({} bytes, at most {}): {}", socket_path.size(),
                             sizeof addr.sun_path - 1, socket_path)};
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Error{fmt::format("socket: {}", std::strerror(errno))};
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Error{fmt::format("cannot listen on {}: {}", socket_path, std::strerror(errno))};
  path_ = socket_path;
  // The backlog also bounds each connection's queue of unread datagrams.
  if (listen(listen_fd_, 4096) != 0) return Error{fmt::format("listen: {}", std::strerror(errno))};
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Error{fmt::format("epoll: {}", std::strerror(errno))};
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  listen_fd_limit_ = DescriptorLimit();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  return Status::Ok();
}

void Server::WatchExtra(int fd) {
  if (extra_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, extra_fd_, nullptr);
  extra_fd_ = fd;
  if (fd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

bool Server::Admit(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
    ++stats_.rejected_peers;
    close(fd);
    return false;
  }
  ++stats_.connections;
  Conn c;
  c.peer = cred.pid;
  conns_[fd] = std::move(c);
  return true;
}

void Server::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        PauseAccept();
      return;
    }
    if (!Admit(fd)) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void Server::PauseAccept() {
  if (accept_paused_) return;
  accept_paused_ = true;
  ++stats_.accept_deferred;
  stats_.fd_limit = DescriptorLimit();
  epoll_event ev{};
  ev.data.fd = listen_fd_;  // no events: the listener stays, unwatched
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
}

void Server::ResumeAccept() {
  accept_paused_ = false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  Accept();
}

// A connection of an audit-library image ended. Without the exit event the image may
// have exec'd (the descriptor is close-on-exec) into a program that is not traced:
// /proc/PID/exe, read now, says what it runs if it is still alive.
void Server::NoteEnd(const Conn& c) {
  auto it = stream_info_.find(c.stream);
  if (it == stream_info_.end()) return;
  Stream& s = it->second;
  --s.open;
  if (s.exited || s.python || s.not_traced != v1::NOT_TRACED_UNSPECIFIED) return;
  s.ended_open = true;
  s.exe_after = ExeOf(c.peer);
}

void Server::Drop(int fd, bool bad) {
  if (bad) ++stats_.bad_clients;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  auto it = conns_.find(fd);
  if (it != conns_.end()) {
    if (!bad) NoteEnd(it->second);
    if (it->second.ring) {
      it->second.ring->Detach();
      --open_rings_;
    }
    conns_.erase(it);
  }
  freed_ = true;
}

bool Server::HandleControl(Conn& c, const uint8_t* data, size_t size, int passed) {
  const bool ok = ring::IsControl(data, size);
  if (ok && data[9] == ring::kWake && passed < 0) return true;  // read below, as every round
  if (!ok || data[9] != ring::kAnnounce || passed < 0 || c.ring) {
    if (passed >= 0) close(passed);
    return false;
  }
  auto r = RingReader::Attach(passed);
  close(passed);  // the mapping keeps the memory
  if (!r.ok()) return false;
  c.ring = std::move(*r);
  ++open_rings_;
  ++stats_.rings;
  return true;
}

bool Server::ReadRing(int fd, bool to_end) {
  auto it = conns_.find(fd);
  if (it == conns_.end() || !it->second.ring) return true;
  Conn& c = it->second;
  // A ring holds at most kCapacity / 8 records; to its end is bounded too (a writer still
  // alive could keep writing): four ringfuls.
  constexpr size_t kPerVisit = 4096;
  const size_t limit = to_end ? 4 * ring::kCapacity / 8 : kPerVisit;
  size_t total = 0;
  do {
    size_t records = 0;
    const auto r = c.ring->Drain(
        limit - total,
        [&](const uint8_t* data, size_t size) {
          if (!SplitFrame(data, size, &slices_)) return false;
          for (const auto& slice : slices_)
            if (!HandleEvent(c, slice.data, slice.size)) return false;
          return true;
        },
        &records);
    total += records;
    stats_.ring_records += records;
    if (r != RingReader::Drained::kOk) {  // the events before the bad one are kept
      Drop(fd, true);
      return false;
    }
  } while (to_end && total < limit && c.ring->Pending());
  return true;
}

void Server::ReadRings() {
  if (open_rings_ == 0) return;
  ring_fds_.clear();
  for (const auto& [fd, c] : conns_)
    if (c.ring) ring_fds_.push_back(fd);
  for (int fd : ring_fds_) ReadRing(fd, false);
}

bool SplitFrame(const uint8_t* data, size_t size, std::vector<FrameSlice>* out) {
  out->clear();
  if (size > kMaxDatagram) return false;
  if (size == 0 || data[0] != kBatchEntryTag) {
    out->push_back({data, size});  // one event
    return true;
  }
  size_t pos = 0;
  while (pos < size) {
    uint64_t tag = 0, len = 0;
    if (!wire::ReadVarint(data, size, &pos, &tag) || tag != kBatchEntryTag ||
        !wire::ReadVarint(data, size, &pos, &len) || len > size - pos)
      return false;
    out->push_back({data + pos, static_cast<size_t>(len)});
    pos += static_cast<size_t>(len);
  }
  return true;
}

bool SplitDatagram(const uint8_t* data, size_t size, std::vector<std::string>* owned,
                   std::vector<FrameSlice>* out) {
  owned->clear();
  if (!IsPyHookDatagram(data, size)) return SplitFrame(data, size, out);
  out->clear();
  if (size > kMaxDatagram || !DecodePyHookDatagram(data, size, owned)) return false;
  for (const auto& e : *owned) out->push_back({reinterpret_cast<const uint8_t*>(e.data()), e.size()});
  return true;
}

bool ParseFrame(const uint8_t* data, size_t size, v1::Event* out) {
  return size <= kMaxDatagram && out->ParseFromArray(data, static_cast<int>(size)) &&
         out->pid() != 0 && out->stream() == 0;
}

// A new Python program image (not a fork) whose PYTHONPATH starts with the hook's
// directory: its hook should report.
static bool ExpectsPythonHook(const v1::ProcessStart& s, const std::string& hook_dir) {
  if (hook_dir.empty() || s.reason() != v1::START_EXEC) return false;
  const std::string& exe = s.exe();
  if (exe.compare(exe.rfind('/') + 1, 6, "python") != 0) return false;
  for (const auto& v : s.env())
    if (v.name() == "PYTHONPATH")
      return v.value() == hook_dir || v.value().rfind(hook_dir + ":", 0) == 0;
  return false;
}

// The directory of a candidate: the interned text where the event defines it, else the
// candidate's own. (Events that name an interned directory without its text add
// nothing: their connection defined it earlier.)
void Server::NoteSearchedDir(const Stream& s, const v1::Search& search) {
  std::string dir = search.dir();
  if (dir.empty()) {
    // The ORIG event names what was asked for: a name with '/' is opened as given (no
    // candidate event follows), a bare name is no directory.
    const std::string& c = search.candidate().empty() ? search.name() : search.candidate();
    if (c.empty() || (search.candidate().empty() && c.find('/') == std::string::npos)) return;
    const auto slash = c.rfind('/');
    dir = slash == std::string::npos ? "" : slash == 0 ? "/" : c.substr(0, slash);
  }
  // An empty LD_LIBRARY_PATH element gives a bare name: the current directory.
  if (dir.empty() || dir.front() != '/') {
    if (s.cwd.empty()) return;
    dir = dir.empty() ? s.cwd : s.cwd + "/" + dir;
  }
  searched_dirs_.insert(std::move(dir));
}

bool Server::HandleEvent(Conn& c, const uint8_t* data, size_t size) {
  v1::Event e;
  if (!ParseFrame(data, size, &e)) return false;
  if (c.stream == 0) {
    // A connection must introduce itself: a ProcessStart from the audit library, a
    // PyStart from the Python hook.
    std::string key;
    if (e.has_process_start())
      key = fmt::format("{}:{}", e.pid(), e.process_start().image_start_ns());
    else if (e.has_py_start())
      key = fmt::format("py:{}:{}", e.pid(), e.mono_ns());
    else
      return false;
    auto [it, inserted] = streams_.try_emplace(key, static_cast<uint32_t>(streams_.size() + 1));
    if (inserted) ++stats_.streams;
    c.stream = it->second;
    c.pid = e.pid();
    Stream& info = stream_info_[c.stream];
    info.pid = e.pid();
    info.python = e.has_py_start();
    if (e.has_process_start()) {
      info.image_start_ns = e.process_start().image_start_ns();
      info.exe = e.process_start().exe();
      info.cwd = e.process_start().cwd();
      info.expects_hook = ExpectsPythonHook(e.process_start(), python_hook_dir_);
      info.not_traced = e.process_start().not_traced();
      info.fd_limit = e.process_start().fd_limit();
    } else {
      info.image_start_ns = e.mono_ns();
    }
    ++info.open;
  } else if (e.pid() != c.pid) {
    return false;  // one connection, one process
  }
  Stream& stream = stream_info_[c.stream];
  ++stream.events;
  stream.min_seq = std::min(stream.min_seq, e.seq());
  stream.max_seq = std::max(stream.max_seq, e.seq());
  if (e.has_exit()) stream.exited = true;
  if (e.has_preinit()) stream.started = true;
  if (e.has_objopen() && stream.started) stream.dlopened = true;
  if (e.has_objopen() && !e.objopen().path().empty() && !e.objopen().is_vdso()) {
    // A relative name ("./x.so", a relative LD_LIBRARY_PATH entry) is the file under the
    // working directory of the load (sent with it; else the one at the start), as the
    // model resolves it.
    std::string path = e.objopen().path();
    const std::string& cwd = e.objopen().cwd().empty() ? stream.cwd : e.objopen().cwd();
    if (path.front() != '/' && !cwd.empty()) path = std::filesystem::path(cwd + "/" + path).lexically_normal().string();
    if (path.front() == '/' && object_paths_.insert(path).second && on_new_object_) on_new_object_(path, e.objopen());
  }
  if (e.has_search()) NoteSearchedDir(stream, e.search());
  ++stats_.events;
  stats_.event_bytes += size;
  uint64_t& d = dropped_by_stream_[c.stream];
  if (e.dropped() > d) {
    stats_.dropped_reported += e.dropped() - d;
    d = e.dropped();
  }
  // A failed write is counted by the writer, whose Close() reports what was lost; the
  // event still counts as received (the trace copy in memory, if kept, has it).
  if (writer_ != nullptr) writer_->AppendEvent(data, size, c.stream).IgnoreError();
  return true;
}

// The descriptors a datagram carried: the first is returned, any other closed.
static int TakePassed(msghdr* msg, bool* more) {
  int passed = -1;
  *more = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
      if (passed < 0) {
        passed = fd;
      } else {
        close(fd);
        *more = true;
      }
    }
  }
  return passed;
}

bool Server::ReadFrom(int fd) {
  static std::vector<uint8_t> buf(kMaxDatagram + 1);
  for (int n = 0; n < 128; ++n) {  // bounded, so one busy peer cannot starve others
    msghdr msg{};
    iovec iov{buf.data(), buf.size()};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    union {
      cmsghdr align;
      char bytes[CMSG_SPACE(4 * sizeof(int))];
    } control;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    // A connection's first datagram may carry its ring's descriptor: room for it, even
    // at our descriptor limit (the spare is taken back once the ring is mapped). Far
    // from the limit there is room anyway, and the spare stays (an open(2) and a
    // close(2) per connection saved).
    auto first = conns_.find(fd);
    const bool make_room = first != conns_.end() && !first->second.ring && first->second.stream == 0 &&
                           spare_fd_ >= 0 && conns_.size() + kSpareMargin >= listen_fd_limit_;
    if (make_room) {
      close(spare_fd_);
      spare_fd_ = -1;
    }
    const ssize_t r = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    bool more_fds = false;
    const int passed = r > 0 ? TakePassed(&msg, &more_fds) : -1;
    if (spare_fd_ < 0 && !(r > 0 && ring::IsControl(buf.data(), static_cast<size_t>(r)) && passed >= 0))
      spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (r <= 0) {
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) return false;
      // The peer closed (the process exited, or let our descriptor go): everything it
      // sent was read; what its ring holds is read now, to the end, after telling a
      // writer still alive to write a new one (so that no record lands after the read).
      auto it = conns_.find(fd);
      if (it != conns_.end() && it->second.ring) it->second.ring->Detach();
      if (ReadRing(fd, true)) Drop(fd, false);
      return false;
    }
    auto it = conns_.find(fd);
    if (it == conns_.end()) {
      if (passed >= 0) close(passed);
      return false;
    }
    ++stats_.datagrams;
    if (ring::IsControl(buf.data(), static_cast<size_t>(r))) {  // a ring's announce, or a wake-up
      if ((msg.msg_flags & MSG_CTRUNC) != 0) {
        // Our descriptor limit lost the ring: no fault of the peer's. Its probe finds
        // the connection gone and it connects again.
        if (passed >= 0) close(passed);
        Drop(fd, false);
        return false;
      }
      const bool well_formed = (msg.msg_flags & MSG_TRUNC) == 0 && !more_fds;
      if (!well_formed && passed >= 0) close(passed);
      const bool ok = well_formed && HandleControl(it->second, buf.data(), static_cast<size_t>(r), passed);
      if (spare_fd_ < 0) spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (!ok) {
        Drop(fd, true);
        return false;
      }
      continue;
    }
    if (passed >= 0) close(passed);
    bool ok = passed < 0 && (msg.msg_flags & MSG_TRUNC) == 0 && static_cast<size_t>(r) <= kMaxDatagram &&
              SplitDatagram(buf.data(), static_cast<size_t>(r), &converted_, &slices_);
    for (size_t i = 0; ok && i < slices_.size(); ++i)
      ok = HandleEvent(it->second, slices_[i].data, slices_[i].size);
    if (!ok) {  // the events before the bad one in a batch are kept, as earlier datagrams are
      Drop(fd, true);
      return false;
    }
  }
  return true;
}

bool Server::SawPid(uint32_t pid) const {
  for (const auto& [stream, s] : stream_info_)
    if (s.pid == pid) return true;
  return false;
}

std::vector<Server::NotTracedImage> Server::NotTracedImages() const {
  std::vector<NotTracedImage> out;
  for (const auto& [stream, s] : StreamsInOrder())
    if (s->not_traced != v1::NOT_TRACED_UNSPECIFIED) out.push_back({s->pid, s->exe, s->not_traced, s->fd_limit});
  return out;
}

std::string Server::ExeOfImage(uint32_t pid, uint64_t image_start_ns) const {
  for (const auto& [stream, s] : stream_info_)
    if (s.pid == pid && s.image_start_ns == image_start_ns && !s.python) return s.exe;
  return "";
}

Server::PollResult Server::Poll(int timeout_ms) {
  // Rings are read at each wake-up, and at least every kReadEveryMs while any is open.
  if (open_rings_ > 0) timeout_ms = timeout_ms < 0 ? ring::kReadEveryMs : std::min(timeout_ms, ring::kReadEveryMs);
  if (accept_paused_)
    timeout_ms = timeout_ms < 0 ? kAcceptRetryMs : std::min(timeout_ms, kAcceptRetryMs);
  freed_ = false;
  epoll_event evs[64];
  int n;
  do {
    n = epoll_wait(epoll_fd_, evs, 64, timeout_ms);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return PollResult::kError;
  if (accept_paused_ && (n == 0 || freed_)) ResumeAccept();
  const uint64_t datagrams_before = stats_.datagrams + stats_.ring_records;
  if (n == 0) {
    ReadRings();
    if (stats_.ring_records + stats_.datagrams == datagrams_before) return PollResult::kIdle;
    if (writer_ != nullptr) writer_->Flush().IgnoreError();
    return PollResult::kServed;
  }
  bool extra = false;
  for (int i = 0; i < n; ++i) {
    const int fd = evs[i].data.fd;
    if (fd == listen_fd_) {
      Accept();
    } else if (fd == extra_fd_) {
      extra = true;
    } else {
      ReadFrom(fd);
    }
  }
  ReadRings();
  if (accept_paused_ && freed_) ResumeAccept();
  if (writer_ != nullptr) writer_->Flush().IgnoreError();  // the writer's Close() reports it
  if (extra) return PollResult::kExtraReady;
  // No pause with no connection open (nothing to gather: the last one just ended), and
  // none past the extra descriptor (the command's end, which `run` waits for).
  if (timeout_ms != 0 && !conns_.empty() &&
      stats_.datagrams + stats_.ring_records - datagrams_before < kCoalesceBelow) {
    timespec pause{0, kCoalesceNs};
    if (extra_fd_ >= 0) {
      pollfd p{extra_fd_, POLLIN, 0};
      ppoll(&p, 1, &pause, nullptr);
    } else {
      nanosleep(&pause, nullptr);
    }
  }
  return PollResult::kServed;
}

// What is queued on open connections, each read to its end.
void Server::ReadQueued() {
  for (int round = 0; round < 64; ++round) {  // bounded: a busy process never ends it
    std::vector<int> fds;
    for (const auto& [fd, c] : conns_) fds.push_back(fd);
    bool more = false;
    for (int fd : fds) {
      while (conns_.count(fd) != 0 && ReadFrom(fd)) more = true;
      ReadRing(fd, true);
    }
    if (!more) break;
  }
}

// Closes the connections of open that are still there, noting the images they leave
// still running (or held by children, once the image exited), and empties open.
void Server::CloseConnections(std::vector<int>* open, v1::CollectorNotes* notes) {
  for (int fd : *open) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    auto s = stream_info_.find(it->second.stream);
    if (s != stream_info_.end() && !s->second.python) {
      if (s->second.exited) {
        notes->set_held_by_children(notes->held_by_children() + 1);
      } else {
        auto* ref = notes->add_still_running();
        ref->set_pid(s->second.pid);
        ref->set_image_start_ns(s->second.image_start_ns);
        s->second.exited = true;  // not "untraced": it was still running
      }
    }
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    if (it->second.ring) {
      it->second.ring->Detach();
      --open_rings_;
    }
    conns_.erase(fd);
  }
  open->clear();
}

// What waits in the backlog, one connection at a time, each read to its end and closed.
void Server::ReadBacklog(v1::CollectorNotes* notes) {
  std::vector<int> open;
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) ++stats_.refused;  // cannot even now
      break;
    }
    if (!Admit(fd)) continue;
    while (conns_.count(fd) != 0 && ReadFrom(fd)) {
    }
    ReadRing(fd, true);
    if (conns_.count(fd) != 0) open.push_back(fd);
    CloseConnections(&open, notes);
  }
}

std::map<uint32_t, const Server::Stream*> Server::StreamsInOrder() const {
  std::map<uint32_t, const Stream*> ordered;
  for (const auto& [stream, s] : stream_info_) ordered[stream] = &s;
  return ordered;
}

Server::ProcessCount Server::CountProcesses() const {
  ProcessCount c;
  std::set<uint32_t> pids;
  for (const auto& [stream, s] : stream_info_) {
    if (s.python) continue;
    ++c.images;
    pids.insert(s.pid);
  }
  c.processes = pids.size();
  return c;
}

// Images that ended without their exit event, with no later image of their pid.
void Server::NoteUntracedAfter(v1::CollectorNotes* notes) const {
  for (const auto& [stream, sp] : StreamsInOrder()) {
    const Stream& s = *sp;
    if (s.python || s.exited || s.open > 0 || !s.ended_open) continue;
    // Gone without its exit event (_exit, as multiprocessing's workers end, or a crash)
    // with every event it sent here: nothing of it is missing. Only an image seen
    // running another program after (exe_after), or one whose events are missing, is
    // worth a note.
    auto d = dropped_by_stream_.find(stream);
    const bool lossy =
        (d != dropped_by_stream_.end() && d->second > 0) || (s.events > 0 && s.max_seq - s.min_seq + 1 != s.events);
    if (s.exe_after.empty() && !lossy) continue;
    bool followed = false;
    for (const auto& [other_stream, o] : stream_info_)
      followed |= other_stream != stream && !o.python && o.pid == s.pid &&
                  o.image_start_ns > s.image_start_ns;
    if (followed) continue;
    auto* u = notes->add_untraced_after();
    u->mutable_image()->set_pid(s.pid);
    u->mutable_image()->set_image_start_ns(s.image_start_ns);
    u->set_exe_after(s.exe_after);
  }
}

// Python programs whose hook never reported.
void Server::NoteSilentHooks(v1::CollectorNotes* notes) const {
  for (const auto& [stream, sp] : StreamsInOrder()) {
    // Only where loads went unattributed: `python3 --version` ends before site runs and
    // loads nothing, which is no loss.
    if (!sp->expects_hook || !sp->dlopened) continue;
    bool reported = false;
    for (const auto& [other_stream, o] : stream_info_)
      reported |= o.python && o.pid == sp->pid && o.image_start_ns >= sp->image_start_ns;
    if (reported) continue;
    auto* r = notes->add_python_hook_silent();
    r->set_pid(sp->pid);
    r->set_image_start_ns(sp->image_start_ns);
  }
}

v1::CollectorNotes Server::StopRecording() {
  v1::CollectorNotes notes;
  if (listen_fd_ < 0) return notes;
  // What is queued on open connections, then what waits in the backlog (descriptors
  // freed by closing finished connections first), each read to its end.
  ReadQueued();
  std::vector<int> open;
  for (const auto& [fd, c] : conns_) open.push_back(fd);
  CloseConnections(&open, &notes);
  ReadBacklog(&notes);
  NoteUntracedAfter(&notes);
  NoteSilentHooks(&notes);
  std::sort(notes.mutable_still_running()->begin(), notes.mutable_still_running()->end(),
            [](const v1::ImageRef& a, const v1::ImageRef& b) { return a.pid() < b.pid(); });
  notes.set_accept_deferred(stats_.accept_deferred);
  notes.set_fd_limit(stats_.fd_limit);
  notes.set_refused(stats_.refused);
  return notes;
}

}  // namespace ldscope::ipc
