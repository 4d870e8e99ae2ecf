// See http.h.
#include "net/http.h"

#include <zlib.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "net/conn.h"

namespace ldscope::net {
namespace {

// The largest reply read (only the status and a short body matter).
constexpr size_t kMaxReply = 64 * 1024;

// The headers of reply (up to its blank line at end), lower-cased.
std::string LowerHeaders(const std::string& reply, size_t end) {
  std::string headers = reply.substr(0, end);
  for (auto& c : headers) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return headers;
}

// Whether reply holds the whole body: Content-Length bytes, or a chunked body's last
// chunk; none for 204 and 304. (Without either, the body ends at the close.)
bool ReplyComplete(const std::string& reply) {
  const auto end = reply.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  if (reply.compare(8, 5, " 204 ") == 0 || reply.compare(8, 5, " 304 ") == 0) return true;
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

// The value of header name (lower-case, with its colon) in lower-cased headers, with
// the original case of reply; "" when absent.
std::string HeaderValue(const std::string& reply, const std::string& lower_headers, const std::string& name) {
  const auto at = lower_headers.find("\r\n" + name);
  if (at == std::string::npos) return "";
  size_t b = at + 2 + name.size();
  const size_t e = lower_headers.find("\r\n", b);
  while (b < e && (reply[b] == ' ' || reply[b] == '\t')) ++b;
  size_t end = e == std::string::npos ? lower_headers.size() : e;
  while (end > b && (reply[end - 1] == ' ' || reply[end - 1] == '\t')) --end;
  return reply.substr(b, end - b);
}

// The status, Retry-After and body (de-chunked) of reply; an error when it is not HTTP.
// *keep: whether the connection can carry another request.
Result<Response> ParseReply(const std::string& reply, const std::string& where, bool* keep) {
  int major = 0, minor = 0, status = 0;
  if (std::sscanf(reply.c_str(), "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
      status > 999)
    return Error{fmt::format("{} did not answer with HTTP ({} bytes)", where, reply.size())};
  Response r;
  r.status = status;
  const auto end = reply.find("\r\n\r\n");
  *keep = false;
  if (end == std::string::npos) return r;
  const std::string headers = LowerHeaders(reply, end);
  *keep =
      ReplyComplete(reply) && major == 1 && minor >= 1 && headers.find("\r\nconnection: close") == std::string::npos;
  r.retry_after = HeaderValue(reply, headers, "retry-after:");
  std::string content = reply.substr(end + 4, kMaxReply);
  if (headers.find("\r\ntransfer-encoding: chunked") != std::string::npos) content = Dechunk(content);
  r.body = content;
  return r;
}

std::string HostHeader(const Url& url) {
  const std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return url.port == (url.https ? 443 : 80) ? host : fmt::format("{}:{}", host, url.port);
}

std::string RequestText(const Url& url, const std::string& path, const Headers& headers, const std::string& body) {
  std::string text = fmt::format("POST {} HTTP/1.1\r\nHost: {}\r\n", path.empty() ? "/" : path, HostHeader(url));
  for (const auto& [name, value] : headers) text += name + ": " + value + "\r\n";
  text += fmt::format("Content-Length: {}\r\n\r\n", body.size());
  return text + body;
}

// Reads the reply to the request just sent: until its body is complete, the peer
// closes, or kMaxReply.
Status ReadReply(Conn& c, uint64_t deadline, std::string* reply) {
  for (;;) {
    char buf[4096];
    Result<size_t> n = c.Recv(buf, sizeof buf, deadline);
    if (!n.ok()) return Error{n.error()};
    if (*n == 0) return Status::Ok();
    reply->append(buf, *n);
    if (ReplyComplete(*reply) || reply->size() > kMaxReply) return Status::Ok();
  }
}

}  // namespace

bool LooksLikeUrl(const std::string& text) {
  const auto p = text.find("://");
  if (p == std::string::npos || p == 0) return false;
  for (size_t i = 0; i < p; ++i)
    if (!isalpha(static_cast<unsigned char>(text[i]))) return false;
  return true;
}

Result<Url> ParseUrl(const std::string& text) {
  const auto scheme_end = text.find("://");
  if (scheme_end == std::string::npos)
    return Error{fmt::format("'{}' is not a URL (http[s]://HOST[:PORT][/PATH])", text)};
  std::string scheme = text.substr(0, scheme_end);
  for (auto& c : scheme) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https")
    return Error{fmt::format("'{}': only http:// and https:// URLs are supported (OTLP/HTTP)", text)};
  std::string rest = text.substr(scheme_end + 3);
  const auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  if (path.find_first_of("?# \t\r\n") != std::string::npos)
    return Error{fmt::format("'{}': a query, fragment or space in the path is not supported", text)};
  if (authority.find('@') != std::string::npos)
    return Error{
        fmt::format("'{}': user names in URLs are not supported (OTEL_EXPORTER_OTLP_HEADERS "
                    "carries credentials)",
                    text)};
  std::string host, port;
  if (!authority.empty() && authority[0] == '[') {
    const auto close = authority.find(']');
    if (close == std::string::npos) return Error{fmt::format("'{}': unclosed [ in the host", text)};
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
    else if (close + 1 != authority.size()) return Error{fmt::format("'{}': garbage after the host", text)};
  } else {
    const auto colon = authority.rfind(':');
    host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (host.empty()) return Error{fmt::format("'{}': no host", text)};
  if (host.find_first_of(" \t\r\n/\\") != std::string::npos)
    return Error{fmt::format("'{}': bad host '{}'", text, host)};
  if (port.empty() && authority.back() != ':') port = scheme == "https" ? "443" : "80";
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) == 0 || std::stoul(port) > 65535)
    return Error{fmt::format("'{}': bad port '{}'", text, port)};
  Url url;
  url.https = scheme == "https";
  url.host = host;
  url.port = static_cast<uint16_t>(std::stoul(port));
  url.path = path;
  return url;
}

std::string UrlText(const Url& url, const std::string& path) {
  return fmt::format("{}://{}:{}{}", url.https ? "https" : "http",
                     url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host, url.port, path);
}

std::string Gzip(const std::string& body) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
  std::string out(deflateBound(&z, body.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : "";
}

Client::Client() = default;
Client::~Client() = default;

Result<Response> Client::Post(const Url& url, const std::string& path, const Headers& headers, const std::string& body,
                              int timeout_ms, const std::string& ca_file) {
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
  const std::string server = fmt::format("{}\n{}\n{}\n{}", url.https, url.host, url.port, ca_file);
  const std::string request = RequestText(url, path, headers, body);
  bool reused = conn_ != nullptr && server_ == server && conn_->Reusable();
  for (;;) {
    if (!reused) {
      conn_.reset();
      Result<std::unique_ptr<Conn>> opened = Conn::Open({url.https, url.host, url.port, ca_file}, deadline);
      if (!opened.ok()) return Error{opened.error()};
      conn_ = std::move(opened).value();
      server_ = server;
      ++connections_;
    }
    std::string reply;
    Status s = conn_->Send(request, deadline);
    if (s.ok()) s = ReadReply(*conn_, deadline, &reply);
    // A kept connection the server closed before answering: once more on a new one.
    if (reused && reply.empty()) {
      reused = false;
      continue;
    }
    if (!s.ok()) {
      conn_.reset();
      return Error{s.error()};
    }
    bool keep = false;
    Result<Response> r = ParseReply(reply, conn_->where(), &keep);
    if (!keep) conn_.reset();
    return r;
  }
}

}  // namespace ldscope::net
