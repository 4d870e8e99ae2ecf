// Regression traces: what changed between a baseline trace and a new one of the same
// workload (processes matched by command line): libraries added, removed, moved to
// another file or version, found by another search step, a different first loader of
// a library family; and findings new and resolved.
#pragma once

#include "ldscope_proto/diff.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::analysis {

v1::Diff DiffTimelines(const v1::Timeline& base, const v1::Timeline& now);

}  // namespace ldscope::analysis
