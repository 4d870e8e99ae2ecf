// Fidelity against glibc itself: the objects ldscope recorded as loaded and unloaded,
// compared with what LD_DEBUG=files says glibc did in the same run. Shared by the
// tests on this machine's glibc and on the other glibcs' sysroots.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ldscope_proto/timeline.pb.h"

namespace ldscope::testing {

struct GlibcView {
  std::vector<std::string> maps;      // "name [ns] base"
  std::vector<std::string> destroys;  // "name [ns]"
};

// Every LD_DEBUG_OUTPUT file (dbg.PID) in dir, by pid. Namespaces that appear in a
// process before its first object of namespace 0 are the auditors' own and are left
// out, as ldscope leaves them out.
std::map<std::string, GlibcView> ParseLdDebug(const std::string& dir);

// The same view of one traced process.
GlibcView LdscopeView(const v1::ProcessTimeline& p);

// Expects every traced process of t to match glibc's account in dir's LD_DEBUG_OUTPUT
// files (dir/dbg.PID), without lost events; returns how many loads were compared.
size_t ExpectTimelineSameAsGlibc(const v1::Timeline& t, const std::string& dir);

// Runs argv under `ldscope run` with LD_DEBUG=files (plus env) and expects every traced
// process to match glibc's account; returns the timeline for further checks.
v1::Timeline ExpectSameAsGlibc(const std::string& name, const std::vector<std::string>& argv,
                               size_t min_objects, const std::vector<std::string>& env = {});

}  // namespace ldscope::testing
