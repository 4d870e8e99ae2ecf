// See otlp.h.
#include <time.h>

#include <chrono>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/otlp.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"
#include "text/escape.h"

namespace ldscope::cli {
namespace {

constexpr size_t kQueueLimit = 32;  // requests waiting to be sent
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
      src.host = text::Escape(h.host());  // the header holds the bytes
      src.start_unix_ns = h.start_unix_ns();
      src.start_mono_ns = h.start_mono_ns();
      first = false;
    }
  }
  return src;
}

OtlpStream::OtlpStream(OtlpConfig config, std::string url_text)
    : poster_(std::move(config)), url_text_(std::move(url_text)), resource_(OtelResourceFromEnv()) {
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
  render::OtlpPayload payload = render::Otlp(timeline, report, OtlpSourceOf(set), select);
  ApplyOtelResource(resource_, &payload);
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
    // The sender's backoff between attempts is cut short when the collector stops.
    auto sleep = [this](int ms) {
      std::unique_lock<std::mutex> l(mu_);
      return !send_cv_.wait_for(l, std::chrono::milliseconds(ms), [this] { return stop_sending_; });
    };
    int attempts = 0;
    const Status posted = poster_.Send(r.suffix, r.body, sleep, &attempts);
    const bool ok = posted.ok();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (ok) {
        sent_spans_ += r.spans;
        sent_logs_ += r.logs;
      } else {
        last_error_ = posted.error();
      }
      failed_posts_ += static_cast<uint64_t>(attempts - (ok ? 1 : 0));
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
