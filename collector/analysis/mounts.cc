// See mounts.h.
#include "analysis/mounts.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/statvfs.h>

#include <fstream>
#include <map>
#include <sstream>

namespace ldscope::analysis {
namespace {

// mountinfo writes blanks, tabs, newlines and backslashes in paths as \NNN (octal).
std::string Unoctal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
        s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool Under(const std::string& dir, const std::string& mount_point) {
  if (mount_point == "/") return !dir.empty() && dir.front() == '/';
  return dir.compare(0, mount_point.size(), mount_point) == 0 &&
         (dir.size() == mount_point.size() || dir[mount_point.size()] == '/');
}

}  // namespace

std::vector<MountLine> ParseMountinfo(std::string_view text) {
  std::vector<MountLine> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional fields...] - type source super-options
    std::istringstream f(line);
    std::vector<std::string> w;
    for (std::string x; f >> x;) w.push_back(x);
    size_t dash = 6;
    while (dash < w.size() && w[dash] != "-") ++dash;
    if (w.size() < 6 || dash + 2 >= w.size()) continue;
    out.push_back({Unoctal(w[4]), w[dash + 1], Unoctal(w[dash + 2]), w[5]});
  }
  return out;
}

const MountLine* MountOf(const std::vector<MountLine>& lines, const std::string& dir) {
  const MountLine* best = nullptr;
  for (const auto& l : lines)
    if (Under(dir, l.mount_point) && (best == nullptr || l.mount_point.size() >= best->mount_point.size())) best = &l;
  return best;
}

std::vector<v1::MountFacts> NoexecMounts(const std::set<std::string>& dirs) {
  std::vector<std::string> noexec;
  for (const auto& d : dirs) {
    struct statvfs vfs {};
    if (statvfs(d.c_str(), &vfs) == 0 && (vfs.f_flag & ST_NOEXEC) != 0) noexec.push_back(d);
  }
  if (noexec.empty()) return {};
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<MountLine> lines = ParseMountinfo(text.str());
  std::map<const MountLine*, v1::MountFacts> by_mount;
  for (const auto& d : noexec) {
    char real[PATH_MAX];
    const MountLine* m = realpath(d.c_str(), real) != nullptr ? MountOf(lines, real) : nullptr;
    v1::MountFacts& f = by_mount[m];
    if (f.dirs_size() == 0 && m != nullptr) {
      f.set_mount_point(m->mount_point);
      f.set_fs_type(m->fs_type);
      f.set_source(m->source);
      f.set_options(m->options);
    } else if (f.dirs_size() == 0) {
      f.set_options("noexec");  // statvfs says so; mountinfo did not name the mount
    }
    f.add_dirs(d);
  }
  std::vector<v1::MountFacts> out;
  for (auto& [m, f] : by_mount) out.push_back(std::move(f));
  return out;
}

}  // namespace ldscope::analysis
