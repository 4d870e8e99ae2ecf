// See otlp.h.
#include <time.h>

#include <chrono>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/otlp.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"

namespace ldscope::cli {
namespace {

namespace collector_trace = opentelemetry::proto::collector::trace::v1;
namespace collector_logs = opentelemetry::proto::collector::logs::v1;

constexpr size_t kQueueLimit = 32;         // requests waiting to be sent
constexpr int kAttempts = 3;               // per request
constexpr int kPostTimeoutMs = 2000;       // connect, send, and reply, each
constexpr auto kConvertInterval = std::chrono::seconds(1);

std::string FindingKey(const v1::Finding& f, const std::string& image) {
  return fmt::format("{}\n{}\n{}", image, static_cast<int>(f.kind()), f.headline());
}

}  // namespace

render::OtlpSource OtlpSourceOf(const store::TraceSet& traces) {
  render::OtlpSource src;
  bool first = true;
  for (const auto& f : traces.files) {
    if (!store::Readable(f)) continue;
    const auto& h = f.header;
    if (first || (h.start_unix_ns() != 0 && h.start_unix_ns() < src.start_unix_ns)) {
      src.host = h.host();
      src.start_unix_ns = h.start_unix_ns();
      src.start_mono_ns = h.start_mono_ns();
      first = false;
    }
  }
  return src;
}

std::string OtlpPost(const net::Url& url, const std::string& suffix, const std::string& body,
                     int timeout_ms) {
  const std::string path = url.path + suffix;
  const net::Response r = net::Post(url, path, "application/x-protobuf", body, timeout_ms);
  const std::string where = fmt::format("http://{}:{}{}", url.host.find(':') != std::string::npos
                                                              ? "[" + url.host + "]" : url.host,
                                        url.port, path);
  if (!r.error.empty()) return fmt::format("{}: {}", where, r.error);
  if (r.status < 200 || r.status > 299) {
    std::string said = r.body.substr(0, 200);
    for (auto& c : said)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '.';
    return fmt::format("{}: HTTP {}{}", where, r.status, said.empty() ? "" : " (" + said + ")");
  }
  // Partial success: the receiver took the request but rejected some of it.
  if (suffix == kOtlpTracesPath) {
    collector_trace::ExportTraceServiceResponse resp;
    if (resp.ParseFromString(r.body) && resp.partial_success().rejected_spans() > 0)
      return fmt::format("{}: the receiver rejected {} spans: {}", where,
                         resp.partial_success().rejected_spans(),
                         resp.partial_success().error_message());
  } else {
    collector_logs::ExportLogsServiceResponse resp;
    if (resp.ParseFromString(r.body) && resp.partial_success().rejected_log_records() > 0)
      return fmt::format("{}: the receiver rejected {} log records: {}", where,
                         resp.partial_success().rejected_log_records(),
                         resp.partial_success().error_message());
  }
  return "";
}

OtlpStream::OtlpStream(net::Url url, std::string url_text)
    : url_(std::move(url)), url_text_(std::move(url_text)) {
  converter_ = std::thread([this] { ConvertLoop(); });
  sender_ = std::thread([this] { SendLoop(); });
}

OtlpStream::~OtlpStream() {
  {
    std::lock_guard<std::mutex> l(mu_);
    abandon_ = true;
    finishing_ = true;
    stop_sending_ = true;
  }
  convert_cv_.notify_all();
  send_cv_.notify_all();
  if (converter_.joinable()) converter_.join();
  if (sender_.joinable()) sender_.join();
}

void OtlpStream::Offer(const std::string& trace_bytes) {
  if (trace_bytes.size() <= offered_) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    pending_.append(trace_bytes, offered_, std::string::npos);
  }
  offered_ = trace_bytes.size();
  convert_cv_.notify_one();
}

void OtlpStream::Finish(const std::string& trace_bytes, int wait_ms) {
  Offer(trace_bytes);
  {
    std::lock_guard<std::mutex> l(mu_);
    finishing_ = true;
  }
  convert_cv_.notify_all();
  converter_.join();
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait_for(l, std::chrono::milliseconds(wait_ms),
                    [this] { return queue_.empty() && !sending_; });
  stop_sending_ = true;
  for (const auto& r : queue_) DropLocked(r);
  queue_.clear();
  l.unlock();
  send_cv_.notify_all();
  sender_.join();
}

std::string OtlpStream::Summary() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out = fmt::format("OTLP to {}: {} spans, {} log records sent", url_text_, sent_spans_,
                                sent_logs_);
  if (dropped_spans_ > 0 || dropped_logs_ > 0 || failed_posts_ > 0)
    out += fmt::format("; {} spans, {} log records dropped", dropped_spans_, dropped_logs_);
  if (!last_error_.empty())
    out += fmt::format(" ({} failed attempt{}, the last: {})", failed_posts_,
                       failed_posts_ == 1 ? "" : "s", last_error_);
  return out;
}

void OtlpStream::ConvertLoop() {
  auto last = std::chrono::steady_clock::now() - kConvertInterval;
  for (;;) {
    std::string fresh;
    bool final_pass = false;
    {
      std::unique_lock<std::mutex> l(mu_);
      convert_cv_.wait(l, [this] { return finishing_ || !pending_.empty(); });
      // At most one conversion a second: later bytes are taken with the next one.
      if (!finishing_) convert_cv_.wait_until(l, last + kConvertInterval, [this] { return finishing_; });
      if (abandon_) return;
      fresh.swap(pending_);
      final_pass = finishing_;
    }
    image_ += fresh;
    last = std::chrono::steady_clock::now();
    Convert(image_, final_pass);
    if (final_pass) return;
  }
}

void OtlpStream::Convert(const std::string& image, bool final_pass) {
  const store::TraceSet set = store::LoadTraceImage("collect", image);
  if (!store::AnyReadable(set)) return;
  const v1::Timeline timeline = model::BuildTimeline(set);
  // Images that ended (or, at the end, every image) and were not sent yet.
  std::set<std::string> now;
  for (const auto& p : timeline.processes()) {
    const std::string key = render::OtlpProcessKey(p);
    if (exported_.count(key) == 0 && (final_pass || p.exited())) now.insert(key);
  }
  if (now.empty() && !final_pass) return;
  const v1::Report report = analysis::Analyze(timeline);
  std::map<uint32_t, std::string> key_of_stream;
  for (const auto& p : timeline.processes()) key_of_stream[p.stream()] = render::OtlpProcessKey(p);
  std::set<std::string> done = exported_;
  done.insert(now.begin(), now.end());
  render::OtlpSelect select;
  select.process = [&](const v1::ProcessTimeline& p) { return now.count(render::OtlpProcessKey(p)) > 0; };
  // Findings of images sent now or before, once each (a finding about several images,
  // such as a sibling mismatch, may appear when a later one ends).
  select.finding = [&](const v1::Finding& f) {
    auto k = key_of_stream.find(f.stream());
    if (k == key_of_stream.end()) return final_pass && findings_sent_.count(FindingKey(f, "")) == 0;
    return done.count(k->second) > 0 && findings_sent_.count(FindingKey(f, k->second)) == 0;
  };
  const render::OtlpPayload payload =
      render::Otlp(timeline, report, OtlpSourceOf(set), select);
  for (const auto& f : report.findings())
    if (select.finding(f)) {
      auto k = key_of_stream.find(f.stream());
      findings_sent_.insert(FindingKey(f, k == key_of_stream.end() ? "" : k->second));
    }
  exported_ = std::move(done);
  if (payload.spans > 0) Enqueue({kOtlpTracesPath, payload.traces.SerializeAsString(), payload.spans, 0});
  if (payload.log_records > 0)
    Enqueue({kOtlpLogsPath, payload.logs.SerializeAsString(), 0, payload.log_records});
}

void OtlpStream::DropLocked(const Request& r) {
  dropped_spans_ += r.spans;
  dropped_logs_ += r.logs;
}

void OtlpStream::Enqueue(Request r) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_sending_ || queue_.size() >= kQueueLimit) {
      DropLocked(r);
      return;
    }
    queue_.push_back(std::move(r));
  }
  send_cv_.notify_one();
}

void OtlpStream::SendLoop() {
  for (;;) {
    Request r;
    {
      std::unique_lock<std::mutex> l(mu_);
      send_cv_.wait(l, [this] { return stop_sending_ || !queue_.empty(); });
      if (stop_sending_) return;  // Finish counted what was left
      r = std::move(queue_.front());
      queue_.pop_front();
      sending_ = true;
    }
    bool ok = false;
    for (int attempt = 0; attempt < kAttempts && !ok; ++attempt) {
      if (attempt > 0) {
        // Backoff: 250 ms, then 500 ms; cut short when the collector stops.
        std::unique_lock<std::mutex> l(mu_);
        if (send_cv_.wait_for(l, std::chrono::milliseconds(250 << (attempt - 1)),
                              [this] { return stop_sending_; }))
          break;
      }
      const std::string err = OtlpPost(url_, r.suffix, r.body, kPostTimeoutMs);
      std::lock_guard<std::mutex> l(mu_);
      if (err.empty()) {
        ok = true;
        sent_spans_ += r.spans;
        sent_logs_ += r.logs;
      } else {
        ++failed_posts_;
        last_error_ = err;
        // 4xx other than 408/429: the receiver will not take it on a retry either.
        if (err.find(": HTTP 4") != std::string::npos && err.find(": HTTP 408") == std::string::npos &&
            err.find(": HTTP 429") == std::string::npos)
          break;
      }
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!ok) DropLocked(r);
      sending_ = false;
    }
    idle_cv_.notify_all();
  }
}

}  // namespace ldscope::cli
