// A minimal blocking HTTP/1.1 client for OTLP/HTTP: POST one body over a plain TCP
// connection and read the status line (and a small reply body). No TLS, no redirects,
// no name service: ldscope is a static binary without NSS, so a host is an IP address,
// `localhost`, or a name listed in /etc/hosts.
#pragma once

#include <cstdint>
#include <string>

#include "text/result.h"

namespace ldscope::net {

struct Url {
  std::string host;        // as written (an IPv6 literal without its brackets)
  uint16_t port = 0;
  std::string path;        // "" or "/..." without a trailing slash
};

// Parses http://HOST:PORT[/PATH]. The error says what is wrong (https, a missing port,
// anything else after the authority).
Result<Url> ParseUrl(const std::string& text);
// Whether text looks like a URL (has a scheme "xxx://"), as opposed to a file name.
bool LooksLikeUrl(const std::string& text);

struct Response {
  int status = 0;          // the HTTP status
  std::string body;        // at most 64 KiB of it
};

// POSTs body to url's host and port at path, waiting at most timeout_ms for each of
// connecting, sending and receiving. Never throws; SIGPIPE is not raised (MSG_NOSIGNAL).
// The error is a connection or protocol failure (no HTTP reply).
Result<Response> Post(const Url& url, const std::string& path, const std::string& content_type,
              const std::string& body, int timeout_ms);

}  // namespace ldscope::net
