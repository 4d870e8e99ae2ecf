// See timer.h.
#include "text/timer.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace ldscope::text {
namespace {

struct Row {
  std::string phase;
  int64_t wall_ns = 0;
  int64_t cpu_ns = 0;
  uint64_t count = 0;
};

std::atomic<bool> enabled{false};

std::mutex& TableMutex() {
  static std::mutex m;
  return m;
}

std::vector<Row>& Rows() {
  static std::vector<Row> rows;
  return rows;
}

// The phase's row; the table's mutex is held.
Row& RowOf(std::string_view phase) {
  for (Row& r : Rows())
    if (r.phase == phase) return r;
  Rows().push_back(Row{std::string(phase)});
  return Rows().back();
}

int64_t Now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

void EnablePhaseTimes() { enabled.store(true, std::memory_order_relaxed); }

bool PhaseTimesEnabled() { return enabled.load(std::memory_order_relaxed); }

void NamePhase(std::string_view phase) {
  if (!PhaseTimesEnabled()) return;
  std::lock_guard<std::mutex> lock(TableMutex());
  RowOf(phase);
}

PhaseTimer::PhaseTimer(std::string_view phase) : on_(PhaseTimesEnabled()) {
  if (!on_) return;
  phase_ = phase;
  wall_ns_ = Now(CLOCK_MONOTONIC);
  cpu_ns_ = Now(CLOCK_PROCESS_CPUTIME_ID);
}

PhaseTimer::~PhaseTimer() {
  if (!on_) return;
  const int64_t wall = Now(CLOCK_MONOTONIC) - wall_ns_;
  const int64_t cpu = Now(CLOCK_PROCESS_CPUTIME_ID) - cpu_ns_;
  std::lock_guard<std::mutex> lock(TableMutex());
  Row& r = RowOf(phase_);
  r.wall_ns += wall;
  r.cpu_ns += cpu;
  ++r.count;
}

std::string PhaseTimesTable() {
  std::lock_guard<std::mutex> lock(TableMutex());
  size_t width = 5;
  for (const Row& r : Rows()) width = std::max(width, r.phase.size());
  std::string out = fmt::format("{:<{}}  {:>10}  {:>10}  {:>7}\n", "phase", width, "wall ms", "CPU ms", "count");
  for (const Row& r : Rows())
    out +=
        fmt::format("{:<{}}  {:>10.3f}  {:>10.3f}  {:>7}\n", r.phase, width, r.wall_ns / 1e6, r.cpu_ns / 1e6, r.count);
  return out;
}

}  // namespace ldscope::text
