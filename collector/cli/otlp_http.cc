// See otlp.h: OpenTelemetry's exporter variables, the resource variables, and sending
// with retries.
#include <strings.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/otlp.h"

namespace ldscope::cli {
namespace {

namespace collector_trace = opentelemetry::proto::collector::trace::v1;
namespace collector_logs = opentelemetry::proto::collector::logs::v1;

constexpr int kMaxAttempts = 5;
constexpr int kFirstBackoffMs = 500;

std::string Env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v == nullptr ? "" : v;
}

// The signal's variable when set, else the general one: OTEL_EXPORTER_OTLP_[SIGNAL_]WHAT.
std::string SignalEnv(const std::string& signal, const std::string& what, std::string* name) {
  std::string v = Env("OTEL_EXPORTER_OTLP_" + signal + "_" + what);
  *name = "OTEL_EXPORTER_OTLP_" + signal + "_" + what;
  if (!v.empty()) return v;
  *name = "OTEL_EXPORTER_OTLP_" + what;
  return Env(*name);
}

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool IsToken(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!isalnum(c) && std::string("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string::npos) return false;
  return true;
}

// KEY=VALUE,... with values percent-decoded (W3C Baggage without properties, as the
// specification says for the headers and resource variables). *bad: the entries that
// are not of that form.
std::vector<std::pair<std::string, std::string>> KeyValues(const std::string& text, bool key_is_token,
                                                           std::vector<std::string>* bad) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string entry = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (Trim(entry).empty()) continue;
    const auto eq = entry.find('=');
    std::string key = Trim(entry.substr(0, eq)), value;
    if (eq == std::string::npos || key.empty() || (key_is_token && !IsToken(key)) ||
        !PercentDecode(Trim(entry.substr(eq + 1)), &value) ||
        value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
      bad->push_back(entry);
      continue;
    }
    out.emplace_back(key, value);
  }
  return out;
}

// The signal's headers: the general variable's, then the signal's (replacing the same
// names); the User-Agent and content headers are ldscope's.
net::Headers HeadersOf(const std::string& signal) {
  net::Headers out;
  for (const std::string& name :
       {std::string("OTEL_EXPORTER_OTLP_HEADERS"), "OTEL_EXPORTER_OTLP_" + signal + "_HEADERS"}) {
    std::vector<std::string> bad;
    for (auto& [k, v] : KeyValues(Env(name), /*key_is_token=*/true, &bad)) {
      std::erase_if(out, [&k = k](const auto& h) { return strcasecmp(h.first.c_str(), k.c_str()) == 0; });
      if (strcasecmp(k.c_str(), "content-length") == 0 || strcasecmp(k.c_str(), "host") == 0) continue;
      out.emplace_back(k, v);
    }
    for (const auto& b : bad)
      Complain(fmt::format("{}: '{}' is not NAME=VALUE (a header name, a percent-encoded value): ignored", name, b));
  }
  return out;
}

Result<OtlpSignal> SignalFromEnv(const std::string& signal, const std::string& suffix, const std::string& endpoint) {
  OtlpSignal s;
  std::string name;
  std::string url_text = endpoint;
  bool as_is = false;
  if (url_text.empty()) {
    name = "OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT";
    url_text = Env(name);
    as_is = !url_text.empty();
  }
  if (url_text.empty()) {
    name = "OTEL_EXPORTER_OTLP_ENDPOINT";
    url_text = Env(name);
  }
  if (url_text.empty()) url_text = "http://localhost:4318";
  Result<net::Url> url = net::ParseUrl(url_text);
  if (!url.ok()) return Error{name.empty() || !endpoint.empty() ? url.error() : name + ": " + url.error()};
  s.url = std::move(url).value();
  if (as_is) {
    s.path = s.url.path.empty() ? "/" : s.url.path;
  } else {
    std::string base = s.url.path;
    while (!base.empty() && base.back() == '/') base.pop_back();
    s.path = base + suffix;
  }
  if (const std::string p = SignalEnv(signal, "PROTOCOL", &name); !p.empty() && p != "http/protobuf")
    return Error{fmt::format("{}={}: ldscope sends OTLP/HTTP protobuf only (http/protobuf)", name, p)};
  if (const std::string t = SignalEnv(signal, "TIMEOUT", &name); !t.empty()) {
    char* end = nullptr;
    const long ms = std::strtol(t.c_str(), &end, 10);
    if (end != nullptr && *end == '\0' && ms > 0 && ms <= 3600 * 1000)
      s.timeout_ms = static_cast<int>(ms);
    else
      Complain(fmt::format("{}='{}' is not a number of milliseconds: using {}", name, t, s.timeout_ms));
  }
  if (const std::string c = SignalEnv(signal, "COMPRESSION", &name); !c.empty()) {
    if (c == "gzip")
      s.gzip = true;
    else if (c != "none")
      Complain(fmt::format("{}='{}': not gzip or none: sending uncompressed", name, c));
  }
  s.ca_file = SignalEnv(signal, "CERTIFICATE", &name);
  s.headers = HeadersOf(signal);
  return s;
}

// Seconds (or an HTTP date) a Retry-After value asks to wait, in ms; -1 when unreadable.
long RetryAfterMs(const std::string& value) {
  if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos)
    return std::min<long>(std::strtol(value.c_str(), nullptr, 10), 24 * 3600) * 1000;
  tm t{};
  const char* end = strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &t);
  if (end == nullptr || *end != '\0') return -1;
  return std::max<long>(0, static_cast<long>(timegm(&t) - std::time(nullptr))) * 1000;
}

// A 2xx reply's partial success: the error when the receiver rejected some items.
Status PartialSuccess(const std::string& suffix, const std::string& where, const std::string& body) {
  if (suffix == kOtlpTracesPath) {
    collector_trace::ExportTraceServiceResponse resp;
    if (resp.ParseFromString(body) && resp.partial_success().rejected_spans() > 0)
      return Error{fmt::format("{}: the receiver rejected {} spans: {}", where, resp.partial_success().rejected_spans(),
                               resp.partial_success().error_message())};
  } else {
    collector_logs::ExportLogsServiceResponse resp;
    if (resp.ParseFromString(body) && resp.partial_success().rejected_log_records() > 0)
      return Error{fmt::format("{}: the receiver rejected {} log records: {}", where,
                               resp.partial_success().rejected_log_records(), resp.partial_success().error_message())};
  }
  return Status::Ok();
}

}  // namespace

bool PercentDecode(const std::string& text, std::string* out) {
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      *out += text[i];
      continue;
    }
    if (i + 2 >= text.size() + 0 || !isxdigit(static_cast<unsigned char>(text[i + 1])) ||
        !isxdigit(static_cast<unsigned char>(text[i + 2])))
      return false;
    *out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
    i += 2;
  }
  return true;
}

Result<OtlpConfig> OtlpConfigFromEnv(const std::string& endpoint) {
  OtlpConfig c;
  Result<OtlpSignal> traces = SignalFromEnv("TRACES", kOtlpTracesPath, endpoint);
  if (!traces.ok()) return Error{traces.error()};
  Result<OtlpSignal> logs = SignalFromEnv("LOGS", kOtlpLogsPath, endpoint);
  if (!logs.ok()) return Error{logs.error()};
  c.traces = std::move(traces).value();
  c.logs = std::move(logs).value();
  return c;
}

std::vector<std::pair<std::string, std::string>> OtelResourceFromEnv() {
  std::vector<std::string> bad;
  auto attrs = KeyValues(Env("OTEL_RESOURCE_ATTRIBUTES"), /*key_is_token=*/false, &bad);
  if (!bad.empty()) {
    Complain(
        fmt::format("OTEL_RESOURCE_ATTRIBUTES: '{}' is not KEY=VALUE (the value percent-encoded): the "
                    "variable is ignored",
                    bad.front()));
    attrs.clear();
  }
  if (const std::string name = Env("OTEL_SERVICE_NAME"); !name.empty()) attrs.emplace_back("service.name", name);
  return attrs;
}

void ApplyOtelResource(const std::vector<std::pair<std::string, std::string>>& attrs, render::OtlpPayload* payload) {
  if (attrs.empty()) return;
  auto apply = [&](opentelemetry::proto::resource::v1::Resource* r) {
    auto* a = r->mutable_attributes();
    for (const auto& [k, v] : attrs) {
      auto it = std::find_if(a->begin(), a->end(), [&k = k](const auto& kv) { return kv.key() == k; });
      auto* kv = it != a->end() ? &*it : a->Add();
      kv->set_key(k);
      kv->mutable_value()->set_string_value(v);
    }
  };
  for (auto& rs : *payload->traces.mutable_resource_spans()) apply(rs.mutable_resource());
  for (auto& rl : *payload->logs.mutable_resource_logs()) apply(rl.mutable_resource());
}

Status OtlpSender::Send(const std::string& suffix, const std::string& body, const std::function<bool(int)>& sleep,
                        int* attempts_made) {
  const OtlpSignal& s = signal(suffix);
  const std::string where = net::UrlText(s.url, s.path);
  net::Headers headers = {{"User-Agent", "ldscope/" LDSCOPE_VERSION}, {"Content-Type", "application/x-protobuf"}};
  if (s.gzip) headers.emplace_back("Content-Encoding", "gzip");
  headers.insert(headers.end(), s.headers.begin(), s.headers.end());
  const std::string sent = s.gzip ? net::Gzip(body) : body;
  const uint64_t deadline = net::NowMs() + static_cast<uint64_t>(s.timeout_ms);
  Status last = Status::Ok();
  int attempt = 0;
  for (int backoff = kFirstBackoffMs;; backoff *= 2) {
    ++attempt;
    if (attempts_made != nullptr) *attempts_made = attempt;
    const uint64_t now = net::NowMs();
    const int left = now >= deadline ? 1 : static_cast<int>(deadline - now);
    Result<net::Response> r = client_.Post(s.url, s.path, headers, sent, left, s.ca_file);
    long wait = backoff;
    if (r.ok() && r->status >= 200 && r->status <= 299) return PartialSuccess(suffix, where, r->body);
    if (r.ok()) {
      std::string said = r->body.substr(0, 200);
      for (auto& c : said)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '.';
      last = Error{fmt::format("{}: HTTP {}{}", where, r->status, said.empty() ? "" : " (" + said + ")")};
      const int st = r->status;
      if (st != 429 && st != 502 && st != 503 && st != 504) return last;
      if (const long asked = RetryAfterMs(r->retry_after); asked >= 0) wait = asked;
    } else {
      last = Error{fmt::format("{}: {}", where, r.error())};
      // Names that do not resolve and certificates that are not trusted stay so.
      if (r.error().find("cannot resolve") != std::string::npos || r.error().find("TLS") != std::string::npos)
        return last;
    }
    const uint64_t after = net::NowMs();
    if (attempt >= kMaxAttempts || after + static_cast<uint64_t>(wait) >= deadline || !sleep(static_cast<int>(wait)))
      break;
  }
  if (attempt == 1) return last;
  return Error{
      fmt::format("{} ({} attempts in {} ms, OTEL_EXPORTER_OTLP_TIMEOUT)", last.error(), attempt, s.timeout_ms)};
}

}  // namespace ldscope::cli
