// A client connection: TCP, or TLS over it (OpenSSL) for https. Non-blocking underneath:
// every call waits at most until its deadline (CLOCK_MONOTONIC milliseconds, NowMs()).
// TLS verifies the server's certificate chain and its name (or IP address) against
// the CA file given, else the system's CA store: SSL_CERT_FILE/SSL_CERT_DIR when set,
// else the first bundle that exists of the distributions' usual places (a static
// binary cannot rely on its build machine's OpenSSL directory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/http.h"
#include "net/resolve.h"
#include "text/result.h"

namespace ldscope::net {

struct Endpoint {
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  std::string ca_file;  // tls: the CAs to trust ("" = the system's)
};

class Conn {
 public:
  // Resolves, connects (each address in turn) and, for TLS, shakes hands.
  static Result<std::unique_ptr<Conn>> Open(const Endpoint& e, uint64_t deadline);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  Status Send(const std::string& data, uint64_t deadline);
  // Some bytes into buf: their count, 0 when the peer closed, or an error.
  Result<size_t> Recv(char* buf, size_t size, uint64_t deadline);
  // Whether the connection can take another request: not closed by the peer, nothing
  // unread on it.
  bool Reusable();
  const std::string& where() const { return where_; }

 private:
  Conn(int fd, std::string where);
  Status Handshake(const Endpoint& e, uint64_t deadline);
  // Waits for what the TLS call that returned ret needs; false on timeout or error.
  bool WaitTls(int ret, uint64_t deadline);

  int fd_ = -1;
  std::string where_;
  struct Tls;
  std::unique_ptr<Tls> tls_;
};

}  // namespace ldscope::net
