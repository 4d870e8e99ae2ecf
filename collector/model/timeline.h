// Turns raw trace events into per-process timelines (proto/timeline.proto): which
// search produced which object, which NEEDED names were satisfied by objects already
// loaded (no search happens then), which dlopens failed and were rolled back.
#pragma once

#include "ldscope_proto/timeline.pb.h"
#include "store/trace_file.h"

namespace ldscope::model {

// Pure: the same trace set always gives the same timeline.
v1::Timeline BuildTimeline(const store::TraceSet& traces);

// glibc reports RPATH and RUNPATH candidates alike (LA_SER_RUNPATH); which one it was
// follows from whether the requester has a DT_RUNPATH. The one place LA_SER_* flags
// become steps (STEP_UNKNOWN: a flag this code does not know).
v1::CandidateStep StepOf(uint32_t flag, bool requester_has_runpath);

}  // namespace ldscope::model
