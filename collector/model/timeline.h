// Turns raw trace events into per-process timelines (proto/timeline.proto): which
// search produced which object, which NEEDED names were satisfied by objects already
// loaded (no search happens then), which dlopens failed and were rolled back.
#pragma once

#include "ldscope_proto/timeline.pb.h"
#include "store/trace_file.h"

#include <functional>

namespace ldscope::model {

// Pure: the same trace set always gives the same timeline.
v1::Timeline BuildTimeline(const store::TraceSet& traces);
// The same into *out, an empty Timeline: one made on an arena (ArenaTimeline) for a
// big trace, whose millions of small fields are then neither allocated nor freed one by
// one.
void BuildTimeline(const store::TraceSet& traces, v1::Timeline* out);
// The same, handing each process image's timeline to `done` as soon as it is complete
// (in the order BuildTimeline gives them) instead of adding it to out->processes(): it
// is freed when done returns (`show` prints a process at a time, and no more than one is
// held whole).
void BuildTimeline(const store::TraceSet& traces, v1::Timeline* out,
                   const std::function<void(const v1::ProcessTimeline&)>& done);
// An empty Timeline on arena, made with blocks of a size fit for big traces.
v1::Timeline* ArenaTimeline(google::protobuf::Arena* arena);
google::protobuf::ArenaOptions TimelineArenaOptions();

// glibc reports RPATH and RUNPATH candidates alike (LA_SER_RUNPATH); which one it was
// follows from whether the requester has a DT_RUNPATH. The one place LA_SER_* flags
// become steps (STEP_UNKNOWN: a flag this code does not know).
v1::CandidateStep StepOf(uint32_t flag, bool requester_has_runpath);

}  // namespace ldscope::model
