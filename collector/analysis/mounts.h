// The noexec mounts that hold directories the traced programs searched or loaded from
// (events.proto's MountFacts): what `run` and `collect` add to a trace at the end, so
// that a library ld.so found and could not map ("failed to map segment from shared
// object") is explained by its mount, wherever the report is made.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ldscope_proto/events.pb.h"

namespace ldscope::analysis {

// One line of /proc/PID/mountinfo (proc(5)): mount point and source with mountinfo's
// octal escapes (\040 for a blank) undone.
struct MountLine {
  std::string mount_point, fs_type, source, options;
};
std::vector<MountLine> ParseMountinfo(std::string_view text);

// The mount of a directory (an absolute path without symbolic links): the line whose
// mount point is its longest prefix, the last such line when several mount at the same
// point (the later one covers the earlier). nullptr: none.
const MountLine* MountOf(const std::vector<MountLine>& lines, const std::string& dir);

// Of dirs (the files' bytes), those that exist on a noexec mount (statvfs's ST_NOEXEC),
// grouped by their mount as /proc/self/mountinfo names it.
std::vector<v1::MountFacts> NoexecMounts(const std::set<std::string>& dirs);

}  // namespace ldscope::analysis
