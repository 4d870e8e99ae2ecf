// See http.h.
#include "net/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ldscope::net {
namespace {

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// An address for host: a literal, localhost, or /etc/hosts. "" or an error.
std::string Resolve(const std::string& host, uint16_t port, sockaddr_storage* out, socklen_t* len) {
  auto literal = [&](const std::string& h) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(out);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
    std::memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port);
      *len = sizeof *v4;
      return true;
    }
    if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(port);
      *len = sizeof *v6;
      return true;
    }
    return false;
  };
  if (literal(host)) return "";
  std::ifstream hosts("/etc/hosts");
  std::string line;
  while (std::getline(hosts, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string addr, name;
    if (!(words >> addr)) continue;
    while (words >> name)
      if (strcasecmp(name.c_str(), host.c_str()) == 0 && literal(addr)) return "";
  }
  if (strcasecmp(host.c_str(), "localhost") == 0 && literal("127.0.0.1")) return "";
  return fmt::format("cannot resolve host '{}': ldscope takes an IP address, localhost or a "
                     "name from /etc/hosts (it has no DNS client)", host);
}

// Waits for fd to be ready for events until deadline; false on timeout or error.
bool WaitFor(int fd, short events, uint64_t deadline_ms) {
  for (;;) {
    const uint64_t now = NowMs();
    if (now >= deadline_ms) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(deadline_ms - now));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// The largest reply read (only the status and a short body matter).
constexpr size_t kMaxReply = 64 * 1024;

// Connects the non-blocking fd to addr within timeout_ms. "" or an error.
std::string Connect(int fd, const sockaddr_storage& addr, socklen_t len, const std::string& where,
                    int timeout_ms) {
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) return fmt::format("cannot connect to {}: {}", where, strerror(errno));
    if (!WaitFor(fd, POLLOUT, deadline))
      return fmt::format("cannot connect to {}: timed out after {} ms", where, timeout_ms);
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err != 0) return fmt::format("cannot connect to {}: {}", where, strerror(err));
  }
  return "";
}

std::string RequestText(const Url& url, const std::string& path, const std::string& content_type,
                        const std::string& body) {
  std::string host_header = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return fmt::format("POST {} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: ldscope\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                     path.empty() ? "/" : path, host_header, url.port, content_type, body.size()) +
         body;
}

// Sends all of request within timeout_ms. "" or an error.
std::string SendAll(int fd, const std::string& request, const std::string& where, int timeout_ms) {
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
  for (size_t done = 0; done < request.size();) {
    const ssize_t n = send(fd, request.data() + done, request.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd, POLLOUT, deadline)) continue;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK
               ? fmt::format("sending to {}: {}", where, strerror(errno))
               : fmt::format("sending to {}: timed out after {} ms", where, timeout_ms);
  }
  return "";
}

// The headers of reply (up to its blank line at end), lower-cased.
std::string LowerHeaders(const std::string& reply, size_t end) {
  std::string headers = reply.substr(0, end);
  for (auto& c : headers) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return headers;
}

// Whether reply holds the whole body: Content-Length bytes, or a chunked body's last
// chunk. (Without either, the body ends at the close.)
bool ReplyComplete(const std::string& reply) {
  const auto end = reply.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const std::string headers = LowerHeaders(reply, end);
  const auto cl = headers.find("\r\ncontent-length:");
  if (cl != std::string::npos) {
    const size_t want = std::strtoul(headers.c_str() + cl + 17, nullptr, 10);
    if (reply.size() - end - 4 >= want) return true;
  }
  return headers.find("\r\ntransfer-encoding: chunked") != std::string::npos &&
         (reply.size() - end - 4 == 5 ? reply.compare(end + 4, 5, "0\r\n\r\n") == 0
                                      : reply.size() >= end + 4 + 7 &&
                                            reply.compare(reply.size() - 7, 7, "\r\n0\r\n\r\n") == 0);
}

// The reply: the status line and headers, then the body (Content-Length, or up to
// the close; chunked bodies are kept as they come: only the status matters). "" or an
// error.
std::string ReadReply(int fd, const std::string& where, int timeout_ms, std::string* reply) {
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
  for (;;) {
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      reply->append(buf, static_cast<size_t>(n));
      if (ReplyComplete(*reply) || reply->size() > kMaxReply) return "";
      continue;
    }
    if (n == 0) return "";
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd, POLLIN, deadline)) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK
               ? fmt::format("waiting for {}'s reply: timed out after {} ms", where, timeout_ms)
               : fmt::format("reading {}'s reply: {}", where, strerror(errno));
  }
}

// Chunks: a hex size line, the data, CRLF; a size of 0 ends the body.
std::string Dechunk(const std::string& content) {
  std::string plain;
  size_t pos = 0;
  while (pos < content.size()) {
    const auto eol = content.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(content.c_str() + pos, nullptr, 16);
    if (n == 0 || eol + 2 + n > content.size()) break;
    plain.append(content, eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return plain;
}

// The status and the body (de-chunked) of reply into r; an error when it is not HTTP.
void ParseReply(const std::string& reply, const std::string& where, Response* r) {
  int major = 0, minor = 0, status = 0;
  if (std::sscanf(reply.c_str(), "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
      status > 999) {
    r->error = fmt::format("{} did not answer with HTTP ({} bytes)", where, reply.size());
    return;
  }
  r->status = status;
  const auto end = reply.find("\r\n\r\n");
  if (end == std::string::npos) return;
  const std::string headers = LowerHeaders(reply, end);
  std::string content = reply.substr(end + 4, kMaxReply);
  if (headers.find("\r\ntransfer-encoding: chunked") != std::string::npos) content = Dechunk(content);
  r->body = content;
}

}  // namespace

bool LooksLikeUrl(const std::string& text) {
  const auto p = text.find("://");
  if (p == std::string::npos || p == 0) return false;
  for (size_t i = 0; i < p; ++i)
    if (!isalpha(static_cast<unsigned char>(text[i]))) return false;
  return true;
}

std::string ParseUrl(const std::string& text, Url* out) {
  const auto scheme_end = text.find("://");
  if (scheme_end == std::string::npos) return fmt::format("'{}' is not a URL (http://HOST:PORT[/PATH])", text);
  std::string scheme = text.substr(0, scheme_end);
  for (auto& c : scheme) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  if (scheme == "https")
    return fmt::format("'{}': https is not supported (ldscope speaks plain HTTP only); send to a "
                       "local OpenTelemetry Collector's http://HOST:4318 and let it forward over TLS",
                       text);
  if (scheme != "http") return fmt::format("'{}': only http:// URLs are supported", text);
  std::string rest = text.substr(scheme_end + 3);
  const auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  if (path.find_first_of("?# \t\r\n") != std::string::npos)
    return fmt::format("'{}': a query, fragment or space in the path is not supported", text);
  if (authority.find('@') != std::string::npos)
    return fmt::format("'{}': user names in URLs are not supported", text);
  std::string host, port;
  if (!authority.empty() && authority[0] == '[') {
    const auto close = authority.find(']');
    if (close == std::string::npos) return fmt::format("'{}': unclosed [ in the host", text);
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
    else if (close + 1 != authority.size()) return fmt::format("'{}': garbage after the host", text);
  } else {
    const auto colon = authority.rfind(':');
    host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (host.empty()) return fmt::format("'{}': no host", text);
  if (port.empty())
    return fmt::format("'{}': no port (the OpenTelemetry Collector's OTLP/HTTP port is usually 4318: "
                       "http://{}:4318)", text, host);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) == 0 || std::stoul(port) > 65535)
    return fmt::format("'{}': bad port '{}'", text, port);
  while (!path.empty() && path.back() == '/') path.pop_back();
  out->host = host;
  out->port = static_cast<uint16_t>(std::stoul(port));
  out->path = path;
  return "";
}

Response Post(const Url& url, const std::string& path, const std::string& content_type,
              const std::string& body, int timeout_ms) {
  Response r;
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (r.error = Resolve(url.host, url.port, &addr, &len); !r.error.empty()) return r;
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    r.error = fmt::format("socket: {}", strerror(errno));
    return r;
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  const std::string where = fmt::format("{}:{}", url.host, url.port);
  if (r.error = Connect(fd, addr, len, where, timeout_ms); !r.error.empty()) return r;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::string request = RequestText(url, path, content_type, body);
  if (r.error = SendAll(fd, request, where, timeout_ms); !r.error.empty()) return r;
  std::string reply;
  if (r.error = ReadReply(fd, where, timeout_ms, &reply); !r.error.empty()) return r;
  ParseReply(reply, where, &r);
  return r;
}

}  // namespace ldscope::net
