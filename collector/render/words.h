// The words for the schema's enums that every output shares (show, report, diff,
// export, the findings' text): the one table of them. Layers below render keep the
// enums and never spell these words themselves; analysis writes findings' text with
// these functions.
#pragma once

#include <string>

#include <fmt/format.h>

#include "ldscope_proto/events.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::render {

// libtree's naming of glibc's search steps (docs/LOADER.md section 2). STEP_UNKNOWN has
// no word: TriedWord prints its flag.
inline const char* StepWord(v1::CandidateStep s) {
  switch (s) {
    case v1::STEP_AS_GIVEN: return "as given";
    case v1::STEP_RPATH: return "RPATH";
    case v1::STEP_LD_LIBRARY_PATH: return "LD_LIBRARY_PATH";
    case v1::STEP_RUNPATH: return "RUNPATH";
    case v1::STEP_LD_SO_CACHE: return "ld.so.cache";
    case v1::STEP_DEFAULT_DIRS: return "default dirs";
    default: return "";
  }
}

// A candidate's step as `show` prints it: the word, or "flag 0x…" for a flag ldscope
// does not know.
inline std::string CandidateWord(const v1::Candidate& c) {
  if (c.step() == v1::STEP_UNKNOWN) return fmt::format("flag {:#x}", c.flag());
  return StepWord(c.step());
}

// The step that found a load: its last candidate's ("" when it tried none).
inline v1::CandidateStep FoundBy(const v1::Load& l) {
  return l.tried_size() > 0 ? l.tried(l.tried_size() - 1).step() : v1::STEP_UNKNOWN;
}
inline std::string FoundByWord(const v1::Load& l) {
  return l.tried_size() > 0 ? CandidateWord(l.tried(l.tried_size() - 1)) : std::string();
}

// "exec", "fork", "reconnect"; "" when no start event was read.
inline const char* StartWord(v1::StartReason r) {
  switch (r) {
    case v1::START_REASON_UNSPECIFIED: return "";
    case v1::START_EXEC: return "exec";
    case v1::START_FORK: return "fork";
    case v1::START_RECONNECT: return "reconnect";
    case v1::START_SNAPSHOT:
      return "snapshot of a running process";
    default: return "unknown";
  }
}

}  // namespace ldscope::render
