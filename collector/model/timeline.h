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
// The same, handing each process image's timeline to `parts` in pieces instead of adding
// it to out->processes() (`show` prints a process as it is built, and holds neither its
// entries nor a process whole): parts(p, false) with p's head (every field set before
// the first event: pid, exe, argv, environment, Python imports) and the entries that no
// later event can change (an entry changes only until the next batch of loads begins:
// docs/ARCHITECTURE.md), which are dropped once it returns; then parts(p, true) once
// the image is complete, with the remaining entries and every other field but the object
// table (`objects`, left empty). Images come in BuildTimeline's order. parts returns
// false to stop: BuildTimeline then returns at once (out's problems and collector summary
// are set; nothing more is built or handed over), as `show` does once its output failed.
//
// with_objects (`report`, which keeps the object table but not the entries): each part
// also carries, in `objects`, the rows of the object table that no later event can
// change (objects that ended, once their entries are handed over), and the complete
// part the rest, so that every row of the whole table arrives once. A row's
// `load_entry` counts all the image's entries, as in the whole timeline. An object id
// opened again after its row arrived gets a row again, later: the later row is the
// table's (the whole table keeps one row per id, the last object of that id).
using ProcessParts = std::function<bool(const v1::ProcessTimeline& p, bool complete)>;
void BuildTimeline(const store::TraceSet& traces, v1::Timeline* out, const ProcessParts& parts,
                   bool with_objects = false);
// An empty Timeline on arena, made with blocks of a size fit for big traces.
v1::Timeline* ArenaTimeline(google::protobuf::Arena* arena);
google::protobuf::ArenaOptions TimelineArenaOptions();

// glibc reports RPATH and RUNPATH candidates alike (LA_SER_RUNPATH); which one it was
// follows from whether the requester has a DT_RUNPATH. The one place LA_SER_* flags
// become steps (STEP_UNKNOWN: a flag this code does not know).
v1::CandidateStep StepOf(uint32_t flag, bool requester_has_runpath);

}  // namespace ldscope::model
