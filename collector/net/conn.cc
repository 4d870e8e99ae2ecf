// See conn.h.
#include "net/conn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ldscope::net {
namespace {

// The CA bundles of the common distributions (Debian and Ubuntu, Fedora and RHEL,
// openSUSE, Alpine and others), as other static TLS clients look for them.
constexpr const char* kCaBundles[] = {"/etc/ssl/certs/ca-certificates.crt",
                                      "/etc/pki/tls/certs/ca-bundle.crt",
                                      "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
                                      "/etc/ssl/ca-bundle.pem",
                                      "/etc/pki/tls/cacert.pem",
                                      "/etc/ssl/cert.pem"};

// Waits for fd to be ready for events until deadline; false on timeout or error.
bool WaitFor(int fd, short events, uint64_t deadline) {
  for (;;) {
    const uint64_t now = NowMs();
    if (now >= deadline) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(deadline - now));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

// OpenSSL writes to the socket with write(): a peer that closed would raise SIGPIPE.
// It is blocked in this thread while a TLS call runs and a SIGPIPE it raised is taken.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

std::string OpensslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "the connection was closed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

Status LoadCas(SSL_CTX* ctx, const std::string& ca_file) {
  if (!ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1)
      return Error{fmt::format("cannot read the CA certificates in {}: {}", ca_file, OpensslError())};
    return Status::Ok();
  }
  SSL_CTX_set_default_verify_paths(ctx);  // SSL_CERT_FILE, SSL_CERT_DIR, OpenSSL's own
  for (const char* bundle : kCaBundles)
    if (access(bundle, R_OK) == 0 && SSL_CTX_load_verify_locations(ctx, bundle, nullptr) == 1) break;
  ERR_clear_error();
  return Status::Ok();
}

Status ConnectOne(int fd, const Address& a, uint64_t deadline) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0) return Status::Ok();
  if (errno != EINPROGRESS) return Error{strerror(errno)};
  if (!WaitFor(fd, POLLOUT, deadline)) return Error{"timed out"};
  int err = 0;
  socklen_t el = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
  if (err != 0) return Error{strerror(err)};
  return Status::Ok();
}

}  // namespace

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

struct Conn::Tls {
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  ~Tls() {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }
};

Conn::Conn(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}

Result<std::unique_ptr<Conn>> Conn::Open(const Endpoint& e, uint64_t deadline) {
  const std::string where =
      fmt::format("{}:{}", e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host, e.port);
  const uint64_t now = NowMs();
  Result<std::vector<Address>> addrs = Resolve(e.host, e.port, static_cast<int>(deadline > now ? deadline - now : 1));
  if (!addrs.ok()) return Error{addrs.error()};
  std::string why;
  for (const Address& a : *addrs) {
    const int fd = socket(a.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      why = strerror(errno);
      continue;
    }
    std::unique_ptr<Conn> c(new Conn(fd, where));
    if (Status s = ConnectOne(fd, a, deadline); !s.ok()) {
      why = s.error() == "timed out" ? fmt::format("timed out after {} ms", deadline - now) : s.error();
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (e.tls)
      if (Status s = c->Handshake(e, deadline); !s.ok()) return Error{s.error()};
    return c;
  }
  return Error{fmt::format("cannot connect to {}: {}", where, why)};
}

Conn::~Conn() {
  if (tls_ != nullptr && tls_->ssl != nullptr) {
    NoSigpipe guard;
    SSL_shutdown(tls_->ssl);
  }
  tls_.reset();
  if (fd_ >= 0) close(fd_);
}

bool Conn::WaitTls(int ret, uint64_t deadline) {
  const int e = SSL_get_error(tls_->ssl, ret);
  if (e == SSL_ERROR_WANT_READ) return WaitFor(fd_, POLLIN, deadline);
  if (e == SSL_ERROR_WANT_WRITE) return WaitFor(fd_, POLLOUT, deadline);
  return false;
}

Status Conn::Handshake(const Endpoint& e, uint64_t deadline) {
  tls_ = std::make_unique<Tls>();
  tls_->ctx = SSL_CTX_new(TLS_client_method());
  if (tls_->ctx == nullptr) return Error{"TLS: " + OpensslError()};
  SSL_CTX_set_min_proto_version(tls_->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(tls_->ctx, SSL_VERIFY_PEER, nullptr);
  if (Status s = LoadCas(tls_->ctx, e.ca_file); !s.ok()) return s;
  tls_->ssl = SSL_new(tls_->ctx);
  if (tls_->ssl == nullptr || SSL_set_fd(tls_->ssl, fd_) != 1) return Error{"TLS: " + OpensslError()};
  in6_addr ip{};
  if (inet_pton(AF_INET, e.host.c_str(), &ip) == 1 || inet_pton(AF_INET6, e.host.c_str(), &ip) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(tls_->ssl), e.host.c_str());
  } else {
    SSL_set_tlsext_host_name(tls_->ssl, e.host.c_str());
    SSL_set1_host(tls_->ssl, e.host.c_str());
  }
  NoSigpipe guard;
  for (;;) {
    ERR_clear_error();
    const int r = SSL_connect(tls_->ssl);
    if (r == 1) return Status::Ok();
    if (WaitTls(r, deadline)) continue;
    const long verify = SSL_get_verify_result(tls_->ssl);
    if (verify != X509_V_OK)
      return Error{fmt::format("TLS with {}: the server's certificate is not trusted: {} (trusted: {})", where_,
                               X509_verify_cert_error_string(verify),
                               e.ca_file.empty() ? "the system's CA certificates; OTEL_EXPORTER_OTLP_CERTIFICATE "
                                                   "names a CA file to trust instead"
                                                 : "the CA certificates in " + e.ca_file)};
    if (NowMs() >= deadline) return Error{fmt::format("TLS with {}: the handshake timed out", where_)};
    return Error{fmt::format("TLS with {}: {}", where_, OpensslError())};
  }
}

Status Conn::Send(const std::string& data, uint64_t deadline) {
  NoSigpipe guard;
  for (size_t done = 0; done < data.size();) {
    ssize_t n;
    if (tls_ != nullptr) {
      ERR_clear_error();
      const int r = SSL_write(tls_->ssl, data.data() + done, static_cast<int>(data.size() - done));
      if (r > 0) {
        done += static_cast<size_t>(r);
        continue;
      }
      if (WaitTls(r, deadline)) continue;
      return Error{NowMs() >= deadline ? fmt::format("sending to {}: timed out", where_)
                                       : fmt::format("sending to {}: {}", where_, OpensslError())};
    }
    n = send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd_, POLLOUT, deadline)) continue;
    return Error{n < 0 && errno != EAGAIN && errno != EWOULDBLOCK
                     ? fmt::format("sending to {}: {}", where_, strerror(errno))
                     : fmt::format("sending to {}: timed out", where_)};
  }
  return Status::Ok();
}

Result<size_t> Conn::Recv(char* buf, size_t size, uint64_t deadline) {
  NoSigpipe guard;
  for (;;) {
    if (tls_ != nullptr) {
      ERR_clear_error();
      const int r = SSL_read(tls_->ssl, buf, static_cast<int>(size));
      if (r > 0) return static_cast<size_t>(r);
      const int e = SSL_get_error(tls_->ssl, r);
      if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) return size_t{0};
      if (WaitTls(r, deadline)) continue;
      if (NowMs() >= deadline) return Error{fmt::format("waiting for {}'s reply: timed out", where_)};
      return Error{fmt::format("reading {}'s reply: {}", where_, OpensslError())};
    }
    const ssize_t n = recv(fd_, buf, size, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd_, POLLIN, deadline)) continue;
    return Error{errno == EAGAIN || errno == EWOULDBLOCK
                     ? fmt::format("waiting for {}'s reply: timed out", where_)
                     : fmt::format("reading {}'s reply: {}", where_, strerror(errno))};
  }
}

bool Conn::Reusable() {
  pollfd p{fd_, POLLIN, 0};
  // Readable while idle: the peer closed (or sent what no request asked for).
  return poll(&p, 1, 0) == 0;
}

}  // namespace ldscope::net
