// See progress.h.
#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace ldscope::cli {
namespace {

bool OnTerminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDERR_FILENO) != 0 && (term == nullptr || std::string_view(term) != "dumb");
}

}  // namespace

Progress::Progress(std::string command, std::string what)
    : on_(OnTerminal()), command_(std::move(command)), what_(std::move(what)) {}

Progress::~Progress() {
  if (on_ && width_ > 0) {
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(width_), "");
    std::fflush(stderr);
  }
}

void Progress::Count(size_t done, size_t total) {
  if (!on_) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && done < total && now - last_ < std::chrono::milliseconds(50)) return;
  last_ = now;
  Show(fmt::format("{}: {} of {} {}", command_, done, total, what_));
}

void Progress::Say(const std::string& text) {
  if (!on_) return;
  std::lock_guard<std::mutex> lock(mu_);
  Show(fmt::format("{}: {}", command_, text));
}

void Progress::What(std::string what) {
  std::lock_guard<std::mutex> lock(mu_);
  what_ = std::move(what);
}

// Spaces over what is left of a longer line before: no escape sequence (which NO_COLOR
// users, and terminals without them, would see).
void Progress::Show(const std::string& line) {
  const size_t pad = width_ > line.size() ? width_ - line.size() : 0;
  std::fprintf(stderr, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
  std::fflush(stderr);
  width_ = std::max(width_, line.size());
  shown_ = true;
}

}  // namespace ldscope::cli
