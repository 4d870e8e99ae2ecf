// See resolve.h.
#include "net/resolve.h"

#include <arpa/inet.h>
#include <ares.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace ldscope::net {
namespace {

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

bool Literal(const std::string& host, uint16_t port, Address* out) {
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    out->len = sizeof *v4;
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    out->len = sizeof *v6;
    return true;
  }
  return false;
}

struct Lookup {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<Address> found;
};

void OnAddrinfo(void* arg, int status, int /*timeouts*/, ares_addrinfo* res) {
  auto* l = static_cast<Lookup*>(arg);
  l->done = true;
  l->status = status;
  if (res == nullptr) return;
  for (ares_addrinfo_node* n = res->nodes; n != nullptr; n = n->ai_next) {
    if (n->ai_addr == nullptr || n->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Address a;
    std::memcpy(&a.addr, n->ai_addr, n->ai_addrlen);
    a.len = static_cast<socklen_t>(n->ai_addrlen);
    l->found.push_back(a);
  }
  ares_freeaddrinfo(res);
}

// Runs the channel's queries until the lookup is done or the deadline passes.
void Drive(ares_channel ch, const Lookup& l, uint64_t deadline) {
  while (!l.done) {
    const uint64_t now = NowMs();
    if (now >= deadline) {
      ares_cancel(ch);  // calls back with ARES_ECANCELLED
      return;
    }
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    const int mask = ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
    pollfd fds[ARES_GETSOCK_MAXNUM];
    nfds_t n = 0;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      const short ev = static_cast<short>((ARES_GETSOCK_READABLE(mask, i) ? POLLIN : 0) |
                                          (ARES_GETSOCK_WRITABLE(mask, i) ? POLLOUT : 0));
      if (ev != 0) fds[n++] = {socks[i], ev, 0};
    }
    timeval max{static_cast<time_t>((deadline - now) / 1000), static_cast<suseconds_t>((deadline - now) % 1000 * 1000)};
    timeval tv{};
    ares_timeout(ch, &max, &tv);
    const int wait = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000) + 1;
    if (poll(fds, n, wait) <= 0) {
      ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts, retries
      continue;
    }
    for (nfds_t i = 0; i < n; ++i)
      ares_process_fd(ch, (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) ? fds[i].fd : ARES_SOCKET_BAD,
                      (fds[i].revents & POLLOUT) ? fds[i].fd : ARES_SOCKET_BAD);
  }
}

}  // namespace

std::string AddressText(const Address& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a.addr)->sin_addr, buf, sizeof buf);
  else if (a.addr.ss_family == AF_INET6)
    return fmt::format("[{}]", inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a.addr)->sin6_addr, buf,
                                         sizeof buf) != nullptr
                                   ? buf
                                   : "?");
  return buf;
}

Result<std::vector<Address>> Resolve(const std::string& host, uint16_t port, int timeout_ms) {
  Address literal;
  if (Literal(host, port, &literal)) return std::vector<Address>{literal};
  static std::once_flag init;
  std::call_once(init, [] { ares_library_init(ARES_LIB_INIT_ALL); });
  ares_channel ch = nullptr;
  ares_options opts{};
  if (const int rc = ares_init_options(&ch, &opts, 0); rc != ARES_SUCCESS)
    return Error{fmt::format("cannot resolve host '{}': {}", host, ares_strerror(rc))};
  struct Destroy {
    ares_channel ch;
    ~Destroy() { ares_destroy(ch); }
  } destroy{ch};
  if (const char* servers = std::getenv("LDSCOPE_DNS_SERVERS"); servers != nullptr && *servers != '\0')
    if (const int rc = ares_set_servers_ports_csv(ch, servers); rc != ARES_SUCCESS)
      return Error{fmt::format("LDSCOPE_DNS_SERVERS='{}': {}", servers, ares_strerror(rc))};
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ARES_AI_NUMERICSERV;
  Lookup l;
  const std::string service = std::to_string(port);
  ares_getaddrinfo(ch, host.c_str(), service.c_str(), &hints, OnAddrinfo, &l);
  Drive(ch, l, NowMs() + static_cast<uint64_t>(timeout_ms));
  if (l.status == ARES_SUCCESS && !l.found.empty()) return l.found;
  // localhost without an /etc/hosts line for it: the loopback address.
  if (strcasecmp(host.c_str(), "localhost") == 0 && Literal("127.0.0.1", port, &literal))
    return std::vector<Address>{literal};
  if (l.status == ARES_ECANCELLED || l.status == ARES_ETIMEOUT)
    return Error{fmt::format("cannot resolve host '{}': no answer within {} ms", host, timeout_ms)};
  return Error{fmt::format("cannot resolve host '{}': {}", host,
                           l.status == ARES_SUCCESS ? "no address" : ares_strerror(l.status))};
}

}  // namespace ldscope::net
