// What the passes read of an analysis::Context, as text (tests and the trace fuzzer
// compare a context built from a whole timeline with one built from its parts, as
// `report` builds it): per process its head fields, every object of the table with its
// load's facts, the entries the passes walk, and the latest entry offset (JUnit's
// duration of a process).
#pragma once

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "analysis/context.h"

namespace ldscope::testing {

inline std::string ContextDump(const analysis::Context& ctx) {
  std::string out;
  for (const auto& pi : ctx.processes()) {
    v1::ProcessTimeline head = *pi.p;
    uint64_t latest = 0;
    for (const auto& e : head.entries()) latest = std::max<uint64_t>(latest, e.offset_ns());
    head.clear_entries();
    head.clear_objects();
    out += fmt::format("process {} latest {} before-first-dlopen {} exe {}\n", head.ShortDebugString(), latest,
                       pi.before_first_dlopen, pi.exe != nullptr ? pi.exe->id : 0);
    for (const auto& [id, o] : pi.objects)
      out += fmt::format("  object {} index {} path {} soname {} build-id {} lmid {} dev {} ino {} open {} "
                         "close {} at {} requester {} rolled-back {} load {}\n",
                         id, o.index, o.path, o.soname, o.build_id, o.lmid, o.dev, o.ino, o.open_seq, o.close_seq,
                         o.at_ms, o.requester, o.rolled_back,
                         o.load != nullptr ? o.load->ShortDebugString() : "none");
    for (const v1::Entry* e : pi.entries) out += "  entry " + e->ShortDebugString() + "\n";
  }
  return out;
}

}  // namespace ldscope::testing
