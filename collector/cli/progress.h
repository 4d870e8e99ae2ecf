// A count on standard error while long work runs ("report: 37 of 500 trace files
// read"), rewritten in place (a carriage return) and erased with spaces when the work
// is done. Only on a terminal (and not TERM=dumb): in a pipe or a file it would be
// noise in a log.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace ldscope::cli {

class Progress {
 public:
  // "COMMAND: DONE of TOTAL WHAT" ("imports", "orders run").
  Progress(std::string command, std::string what);
  ~Progress();  // erases the line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // done of total units; from any thread. The line is rewritten at most every 50 ms,
  // and when the last unit is done.
  void Count(size_t done, size_t total);
  // A phase without a count ("report: analysing").
  void Say(const std::string& text);
  // Another unit's words for the next counts ("hosts analysed").
  void What(std::string what);
  bool on() const { return on_; }

 private:
  void Show(const std::string& line);  // mu_ held

  const bool on_;
  std::string command_, what_;
  std::mutex mu_;
  bool shown_ = false;
  size_t width_ = 0;  // the longest line shown: what erasing covers with spaces
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace ldscope::cli
