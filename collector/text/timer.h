// Where a command's time goes, phase by phase (`report --perf`): a scoped timer adds its
// wall and CPU time to its phase's row, and the table prints the rows in the order they
// were first named. Off unless enabled: a timer then reads no clock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ldscope::text {

// Turns the timers on for the rest of the process.
void EnablePhaseTimes();
bool PhaseTimesEnabled();

// A row for the phase, with nothing counted yet, so that a phase that never ran is
// listed too (count 0). A no-op while the timers are off.
void NamePhase(std::string_view phase);

// The wall-clock and CPU time (the whole process's, every thread's) from its
// construction to its destruction, added to the phase's row, whose count it raises by
// one. Timers may nest (a pass inside the analysis) and run on several threads.
class PhaseTimer {
 public:
  explicit PhaseTimer(std::string_view phase);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  std::string phase_;
  int64_t wall_ns_ = 0;
  int64_t cpu_ns_ = 0;
  bool on_ = false;
};

// f(), timed as the phase: `auto x = Timed("read", [&] { return Read(); });`.
template <class F>
auto Timed(std::string_view phase, F&& f) {
  const PhaseTimer timer(phase);
  return f();
}

// The table: a header line, then one line per phase (phase, wall ms, CPU ms, count).
std::string PhaseTimesTable();

}  // namespace ldscope::text
