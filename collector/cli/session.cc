// See session.h.
#include "cli/session.h"

#include <gnu/libc-version.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

namespace ldscope::cli {

std::string Session::Start(const std::string& socket_path, const std::string& output,
                           bool keep_copy) {
  v1::TraceHeader& h = header_;
  h.set_format_version(1);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  h.set_host(host);
  h.set_glibc_version(gnu_get_libc_version());
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  h.set_start_unix_ns(static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec);
  h.set_writer("ldscope " LDSCOPE_VERSION);
  if (keep_copy) writer_.KeepCopy();
  if (std::string err = writer_.Prepare(output); !err.empty()) return err;
  if (std::string err = server_.Listen(socket_path); !err.empty()) {
    Abandon();
    return err;
  }
  server_.set_writer(&writer_);
  return "";
}

std::string Session::Begin() { return writer_.Begin(header_); }

void Session::Abandon() {
  server_.Shutdown();
  writer_.Discard();
}

void Session::Drain(int idle_ms, int cap_ms) {
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    // Nothing connected: only take what is already queued (accepts included), then stop.
    const auto r = server_.Poll(server_.open_connections() == 0 ? 0 : idle_ms);
    const bool idle = (r == ipc::Server::PollResult::kIdle && server_.open_connections() == 0) ||
                      r == ipc::Server::PollResult::kError;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long elapsed_ms =
        (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (idle || elapsed_ms >= cap_ms) return;
  }
}

std::string Session::Finish() {
  server_.Shutdown();
  return writer_.Close();
}

std::string Session::Summary() const {
  const auto& s = server_.stats();
  std::string out = fmt::format("{} process images, {} events, {} dropped", s.streams, s.events,
                                s.dropped_reported);
  if (s.bad_clients > 0) out += fmt::format(", {} bad clients disconnected", s.bad_clients);
  if (s.rejected_peers > 0) out += fmt::format(", {} peers of another user refused", s.rejected_peers);
  return out;
}

}  // namespace ldscope::cli
