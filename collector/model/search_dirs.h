// The default directories and glibc-hwcaps subdirectories a process's loads tried.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ldscope_proto/timeline.pb.h"
#include "loader/search.h"

namespace ldscope::model {

// The glibc-hwcaps subdirectories and the default directories glibc tried, learnt from
// the candidate paths of the loads (the first search that went through several
// directories shows the subdirectories), entry by entry: the entries of a streamed
// image are gone by the end.
class SearchDirs {
 public:
  void Add(const v1::Entry& e) {
    if (!e.has_load()) return;
    const auto& l = e.load();
    if (!learnt_ && l.tried_size() > 1 && l.requested_name().find('/') == std::string::npos) {
      std::vector<std::string> tried;
      for (const auto& c : l.tried()) tried.push_back(c.path());
      subdirs_ = loader::SubdirsFromCandidates(tried, l.requested_name());
      learnt_ = !subdirs_.empty();
    }
    // The directories as tried; their subdirectories are cut off at the end (the
    // subdirectories may be learnt from a later load).
    for (const auto& c : l.tried()) {
      if (c.step() != v1::STEP_DEFAULT_DIRS) continue;
      std::string dir = c.path().substr(0, c.path().rfind('/'));
      if (std::find(raw_.begin(), raw_.end(), dir) == raw_.end()) raw_.push_back(std::move(dir));
    }
  }
  void Set(v1::ProcessTimeline* p) const {
    std::vector<std::string> defaults;
    for (std::string dir : raw_) {
      for (const auto& sub : subdirs_)
        if (dir.size() > sub.size() && dir.compare(dir.size() - sub.size(), sub.size(), sub) == 0)
          dir = dir.substr(0, dir.size() - sub.size() - 1);
      if (std::find(defaults.begin(), defaults.end(), dir) == defaults.end()) defaults.push_back(dir);
    }
    for (const auto& s : subdirs_) p->add_hwcaps_subdirs(s);
    for (auto& d : defaults) p->add_default_dirs(std::move(d));
  }

 private:
  bool learnt_ = false;
  std::vector<std::string> subdirs_, raw_;
};

}  // namespace ldscope::model
