// See server.h.
#include "ipc/server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace ldscope::ipc {
namespace {

constexpr uint8_t kBatchEntryTag = 0x0a;  // field 1, wire type 2 (length-delimited)

}  // namespace

Server::~Server() { Shutdown(); }

void Server::Shutdown() {
  for (auto& [fd, c] : conns_) close(fd);
  conns_.clear();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    unlink(path_.c_str());
  }
  if (epoll_fd_ >= 0) {
    close(epoll_fd_);
    epoll_fd_ = -1;
  }
}

std::string Server::Listen(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    return fmt::format("socket path too long ({} bytes, at most {}): {}", socket_path.size(),
                       sizeof addr.sun_path - 1, socket_path);
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return fmt::format("socket: {}", std::strerror(errno));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return fmt::format("cannot listen on {}: {}", socket_path, std::strerror(errno));
  path_ = socket_path;
  // The backlog also bounds each connection's queue of unread datagrams.
  if (listen(listen_fd_, 4096) != 0) return fmt::format("listen: {}", std::strerror(errno));
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return fmt::format("epoll: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  return "";
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

void Server::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
      ++stats_.rejected_peers;
      close(fd);
      continue;
    }
    ++stats_.connections;
    conns_[fd] = Conn{};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void Server::Drop(int fd, bool bad) {
  if (bad) ++stats_.bad_clients;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  conns_.erase(fd);
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
    if (!store::ReadVarint(data, size, &pos, &tag) || tag != kBatchEntryTag ||
        !store::ReadVarint(data, size, &pos, &len) || len > size - pos)
      return false;
    out->push_back({data + pos, static_cast<size_t>(len)});
    pos += static_cast<size_t>(len);
  }
  return true;
}

bool ParseFrame(const uint8_t* data, size_t size, v1::Event* out) {
  return size <= kMaxDatagram && out->ParseFromArray(data, static_cast<int>(size)) &&
         out->pid() != 0 && out->stream() == 0;
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
  } else if (e.pid() != c.pid) {
    return false;  // one connection, one process
  }
  ++stats_.events;
  stats_.event_bytes += size;
  uint64_t& d = dropped_by_stream_[c.stream];
  if (e.dropped() > d) {
    stats_.dropped_reported += e.dropped() - d;
    d = e.dropped();
  }
  if (writer_ != nullptr) writer_->AppendEvent(data, size, c.stream);
  return true;
}

void Server::ReadFrom(int fd) {
  static std::vector<uint8_t> buf(kMaxDatagram + 1);
  for (int n = 0; n < 128; ++n) {  // bounded, so one busy peer cannot starve others
    msghdr msg{};
    iovec iov{buf.data(), buf.size()};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const ssize_t r = recvmsg(fd, &msg, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      Drop(fd, false);
      return;
    }
    if (r == 0) {  // peer closed (process exited): everything it sent was read
      Drop(fd, false);
      return;
    }
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    ++stats_.datagrams;
    bool ok = (msg.msg_flags & MSG_TRUNC) == 0 && static_cast<size_t>(r) <= kMaxDatagram &&
              SplitFrame(buf.data(), static_cast<size_t>(r), &slices_);
    for (size_t i = 0; ok && i < slices_.size(); ++i)
      ok = HandleEvent(it->second, slices_[i].data, slices_[i].size);
    if (!ok) {  // the events before the bad one in a batch are kept, as earlier datagrams are
      Drop(fd, true);
      return;
    }
  }
}

Server::PollResult Server::Poll(int timeout_ms) {
  epoll_event evs[64];
  int n;
  do {
    n = epoll_wait(epoll_fd_, evs, 64, timeout_ms);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return PollResult::kError;
  if (n == 0) return PollResult::kIdle;
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
  if (writer_ != nullptr) writer_->Flush();
  return extra ? PollResult::kExtraReady : PollResult::kServed;
}

}  // namespace ldscope::ipc
