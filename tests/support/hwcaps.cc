// See hwcaps.h.
#include "support/hwcaps.h"

#include <cstdio>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace ldscope::testing {
namespace {

// A "tried" line of `ldscope show`: indent, "tried  ", the step padded to 16, the path.
struct Tried {
  std::string indent, step, path;
};

bool ParseTried(const std::string& line, Tried* t) {
  const auto at = line.find("tried  ");
  if (at == std::string::npos || line.find_first_not_of(' ') != at) return false;
  const size_t step_at = at + 7;
  if (line.size() < step_at + 17) return false;
  t->indent = line.substr(0, at);
  t->step = line.substr(step_at, 16);
  t->step.erase(t->step.find_last_not_of(' ') + 1);
  t->path = line.substr(step_at + 17);
  return true;
}

bool IsDirectoryStep(const std::string& step) {
  return step == "RPATH" || step == "RUNPATH" || step == "LD_LIBRARY_PATH" || step == "default dirs";
}

std::string DirOf(const std::string& p) { return p.substr(0, p.rfind('/')); }
std::string BaseOf(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// The searched directory a candidate in a hwcaps subdirectory belongs to (the longest
// hwcaps suffix comes off: "D/tls/x86_64/F" is under D), or "".
std::string SearchedDir(const std::string& candidate) {
  const std::string dir = DirOf(candidate);
  std::string searched;
  for (size_t cut = dir.rfind('/'); cut != std::string::npos && cut > 0; cut = dir.rfind('/', cut - 1)) {
    if (IsHwcapsSubdir(dir.substr(cut + 1))) searched = dir.substr(0, cut);
  }
  return searched;
}

}  // namespace

bool IsHwcapsSubdir(const std::string& sub) {
  if (sub.rfind("glibc-hwcaps/", 0) == 0) return sub.find('/', 13) == std::string::npos && sub.size() > 13;
  // glibc <= 2.36: "tls", the AT_PLATFORM names and the "important" hwcap names, any
  // combination of them in glibc's order (x86-64: x86_64, haswell, xeon_phi, avx512_1).
  static const std::set<std::string> kLegacy = {"tls", "x86_64", "haswell", "xeon_phi",
                                                "avx512_1", "aarch64"};
  std::stringstream parts(sub);
  std::string part;
  int n = 0;
  while (std::getline(parts, part, '/')) {
    if (!kLegacy.count(part)) return false;
    ++n;
  }
  return n > 0;
}

std::string NormaliseHwcaps(const std::string& show_text) {
  std::stringstream in(show_text);
  std::string out, line;
  std::vector<std::string> held;  // hwcaps candidates waiting for their directory's own
  std::string held_dir, held_step, held_base;
  size_t dropped = 0;
  bool searched_dirs = false;  // since the last "events" line
  auto flush = [&] {
    for (const auto& h : held) out += h + "\n";
    held.clear();
  };
  while (std::getline(in, line)) {
    Tried t;
    // Already canonical: a placeholder line and its directory's own candidate.
    if (line.find("/${HWCAPS}/") != std::string::npos) {
      flush();
      out += line + "\n";
      if (std::getline(in, line)) out += line + "\n";
      searched_dirs = true;
      continue;
    }
    if (ParseTried(line, &t) && IsDirectoryStep(t.step)) {
      searched_dirs = true;
      const std::string searched = SearchedDir(t.path);
      if (!searched.empty()) {
        if (!held.empty() && (searched != held_dir || t.step != held_step || BaseOf(t.path) != held_base))
          flush();
        held.push_back(line);
        held_dir = searched, held_step = t.step, held_base = BaseOf(t.path);
        continue;
      }
      if (!held.empty() && DirOf(t.path) == held_dir && t.step == held_step && BaseOf(t.path) == held_base) {
        dropped += held.size();
        held.clear();
      }
      flush();
      out += fmt::format("{}tried  {:<16} {}/${{HWCAPS}}/{}\n", t.indent, t.step, DirOf(t.path),
                         BaseOf(t.path));
      out += line + "\n";
      continue;
    }
    flush();
    size_t n = 0, len = 0;
    if (searched_dirs && line.rfind("  events ", 0) == 0 && sscanf(line.c_str(), "  events %zu%zn", &n, &len) == 1 &&
        line.compare(len, 12, " + ${HWCAPS}") != 0) {
      line = fmt::format("  events {} + ${{HWCAPS}}{}", n - dropped, line.substr(len));
      dropped = 0;
      searched_dirs = false;
    }
    out += line + "\n";
  }
  flush();
  if (!show_text.empty() && show_text.back() != '\n') out.pop_back();
  return out;
}

}  // namespace ldscope::testing
