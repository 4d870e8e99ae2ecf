// Regression traces: what changed between a baseline trace and a new one of the same
// workload (processes matched by command line): libraries added, removed, moved to
// another file or version, found by another search step, a different first loader of
// a library family; and findings new and resolved.
#pragma once

#include "elf/facts.h"
#include "ldscope_proto/diff.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::analysis {

// The facts: each trace's ELF facts (elf/facts.h), for files gone or changed; may be nullptr.
v1::Diff DiffTimelines(const v1::Timeline& base, const v1::Timeline& now,
                       const elf::TraceFacts* base_facts = nullptr, const elf::TraceFacts* now_facts = nullptr);

}  // namespace ldscope::analysis
