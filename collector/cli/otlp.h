// OTLP delivery for `export --otlp` and `collect --otlp` (the payload itself is
// render/otlp.h's): POSTs to an OpenTelemetry Collector's OTLP/HTTP endpoint, and the
// background sender `collect` streams through.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "net/http.h"
#include "render/otlp.h"
#include "store/trace_file.h"

namespace ldscope::cli {

// What the earliest readable header of the set says about where and when the trace
// was taken (the OTLP resource's host and the anchor of its times).
render::OtlpSource OtlpSourceOf(const store::TraceSet& traces);

// The request paths under the endpoint's base URL (OTLP/HTTP's conventions).
constexpr const char* kOtlpTracesPath = "/v1/traces";
constexpr const char* kOtlpLogsPath = "/v1/logs";

// Where and how one signal is sent (OpenTelemetry's exporter variables, cli/otlp_http.cc).
struct OtlpSignal {
  net::Url url;            // the server
  std::string path;        // the request path
  net::Headers headers;    // OTEL_EXPORTER_OTLP_[signal_]HEADERS
  int timeout_ms = 10000;  // OTEL_EXPORTER_OTLP_[signal_]TIMEOUT: all attempts together
  bool gzip = false;       // OTEL_EXPORTER_OTLP_[signal_]COMPRESSION=gzip
  std::string ca_file;     // OTEL_EXPORTER_OTLP_[signal_]CERTIFICATE
};

struct OtlpConfig {
  OtlpSignal traces, logs;
};

// The destinations from OpenTelemetry's variables: endpoint is --otlp URL (the base
// URL: /v1/traces and /v1/logs appended), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// _LOGS_ENDPOINT (as they are), else OTEL_EXPORTER_OTLP_ENDPOINT (the base URL), else
// http://localhost:4318. A bad URL, or OTEL_EXPORTER_OTLP_PROTOCOL other than
// http/protobuf, is an error; a bad timeout, compression or header entry is reported
// on standard error and ignored, as the specification asks.
Result<OtlpConfig> OtlpConfigFromEnv(const std::string& endpoint);

// OTEL_RESOURCE_ATTRIBUTES (KEY=VALUE,..., values percent-decoded), then
// OTEL_SERVICE_NAME as service.name. A malformed OTEL_RESOURCE_ATTRIBUTES is reported on
// standard error and ignored whole, as the specification asks.
std::vector<std::pair<std::string, std::string>> OtelResourceFromEnv();
// Sets those attributes on every resource of the payload, replacing ldscope's of the
// same keys (its service.name, the executable's name, included).
void ApplyOtelResource(const std::vector<std::pair<std::string, std::string>>& attrs, render::OtlpPayload* payload);

// Percent-decodes text (%XX); false when a % is not followed by two hex digits.
bool PercentDecode(const std::string& text, std::string* out);

// Sends OTLP requests through one HTTP client (so traces and logs to one server share a
// connection), retrying 429, 502, 503 and 504 replies and failed connections with
// exponential backoff (0.5 s, doubling) or the wait Retry-After asks for, within the
// signal's timeout and at most 5 attempts.
class OtlpSender {
 public:
  explicit OtlpSender(OtlpConfig config) : config_(std::move(config)) {}
  // POSTs one request body (application/x-protobuf) for the signal whose path suffix is
  // kOtlpTracesPath or kOtlpLogsPath. Succeeds on a 2xx reply, else says what went wrong
  // ("URL: HTTP 503", "cannot connect ..."). A 2xx reply that reports rejected items
  // (partial success) is an error too. sleep(ms) waits between attempts and returns
  // false to stop retrying; *attempts_made counts the POSTs tried.
  Status Send(const std::string& suffix, const std::string& body, const std::function<bool(int)>& sleep,
              int* attempts_made = nullptr);
  const OtlpSignal& signal(const std::string& suffix) const {
    return suffix == kOtlpTracesPath ? config_.traces : config_.logs;
  }

 private:
  OtlpConfig config_;
  net::Client client_;
};

// `collect --otlp URL`: turns the trace recorded so far into OTLP as process images end
// and sends it from background threads, so the collector's event loop never waits on
// the endpoint. A conversion thread rebuilds the timeline from the trace at most once a
// second when events arrived, and queues the spans of images that have exited (and
// their findings); a sender thread posts the queue, retrying each request a bounded
// number of times with backoff. When the queue is full (the endpoint is slow or dead),
// new requests are dropped and their spans and log records counted.
class OtlpStream {
 public:
  OtlpStream(OtlpConfig config, std::string url_text);
  ~OtlpStream();
  OtlpStream(const OtlpStream&) = delete;
  OtlpStream& operator=(const OtlpStream&) = delete;

  // From the event loop: the whole trace so far (the collector's in-memory copy). Only
  // the bytes not offered before are copied; never waits for the threads' work.
  void Offer(const std::string& trace_bytes);
  // Recording stopped: converts everything not sent yet (images still running too),
  // then gives the sender at most wait_ms to empty the queue; what is left is dropped.
  void Finish(const std::string& trace_bytes, int wait_ms);
  // "OTLP to URL: N spans, M log records sent; D spans, L log records dropped (...)".
  std::string Summary() const;

 private:
  struct Request {
    std::string suffix;
    std::string body;
    uint64_t spans = 0, logs = 0;
  };
  void ConvertLoop();
  void SendLoop();
  void Convert(const std::string& image, bool final_pass);
  void Enqueue(Request r);
  void DropLocked(const Request& r);

  OtlpSender poster_;  // used by the sender thread only
  const std::string url_text_;
  const std::vector<std::pair<std::string, std::string>> resource_;  // OtelResourceFromEnv

  mutable std::mutex mu_;
  std::condition_variable convert_cv_, send_cv_, idle_cv_;
  std::string pending_;          // bytes offered, not yet taken by the converter
  size_t offered_ = 0;           // bytes of the trace offered so far
  bool finishing_ = false;       // Finish called: a final pass, then stop converting
  bool abandon_ = false;         // destroyed without Finish: stop at once
  bool stop_sending_ = false;
  bool sending_ = false;
  std::deque<Request> queue_;
  uint64_t sent_spans_ = 0, sent_logs_ = 0, dropped_spans_ = 0, dropped_logs_ = 0;
  uint64_t failed_posts_ = 0;
  std::string last_error_;

  // The converter's own state.
  std::string image_;
  std::set<std::string> exported_;         // OtlpProcessKey of images sent
  std::set<std::string> findings_sent_;    // (image, kind, headline) of findings sent

  std::thread converter_, sender_;
};

}  // namespace ldscope::cli
