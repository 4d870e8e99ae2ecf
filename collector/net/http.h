// A small blocking HTTP/1.1 client for OTLP/HTTP: POSTs a body over TCP, or over TLS for
// https (net/conn.h: the server's certificate verified against the system's CAs or a
// given CA file), to a host name resolved through DNS (net/resolve.h). One connection
// is kept open between requests to the same endpoint (keep-alive). No redirects, no
// proxies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/result.h"

namespace ldscope::net {

class Conn;

struct Url {
  bool https = false;
  std::string host;        // as written (an IPv6 literal without its brackets)
  uint16_t port = 0;       // as written, else 80 (http) or 443 (https)
  std::string path;        // "" or "/..." as written
};

// Parses http[s]://HOST[:PORT][/PATH]. The error says what is wrong (another scheme, a
// bad port, a query or user name, anything else after the authority).
Result<Url> ParseUrl(const std::string& text);
// Whether text looks like a URL (has a scheme "xxx://"), as opposed to a file name.
bool LooksLikeUrl(const std::string& text);
// The URL of path on url's server: http://HOST:PORT/PATH.
std::string UrlText(const Url& url, const std::string& path);

// The body gzip-compressed (RFC 1952), for Content-Encoding: gzip.
std::string Gzip(const std::string& body);

// CLOCK_MONOTONIC in milliseconds: the clock of deadlines.
uint64_t NowMs();

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Response {
  int status = 0;           // the HTTP status
  std::string retry_after;  // the Retry-After header's value ("" when absent)
  std::string body;         // at most 64 KiB of it
};

class Client {
 public:
  Client();
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // POSTs body to url's server at path with the headers given (Host and Content-Length
  // are added), waiting at most timeout_ms in all. The connection of the previous
  // request is reused when it went to the same server and is still open; a reused one
  // the server closed meanwhile is replaced once. ca_file: for https, the CAs to trust
  // ("" = the system's). Never throws; raises no SIGPIPE. The error is a connection or
  // protocol failure (no HTTP reply).
  Result<Response> Post(const Url& url, const std::string& path, const Headers& headers, const std::string& body,
                        int timeout_ms, const std::string& ca_file = "");
  // Connections opened so far.
  int connections() const { return connections_; }

 private:
  std::unique_ptr<Conn> conn_;
  std::string server_;  // what conn_ is connected to
  int connections_ = 0;
};

}  // namespace ldscope::net
