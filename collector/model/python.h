// Python attribution: ties the events of ldscope's Python hook (imports beginning and
// ending, ctypes dlopens) to a process image's timeline, by thread and time, and gives
// each load the innermost import, the line that triggered it and the top-level import.
#pragma once

#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::model {

// What attribution needs to know about an entry beyond the entry itself: the name the
// dlopen (or search) it belongs to asked for ("" for start-up loads and unloads).
struct EntryRequest {
  std::string name;
};

// One hook connection's events (sorted by seq; the first is its PyStart).
using PyStream = std::vector<const v1::Event*>;

// Fills p's python info, imports, and the python cause of its loads, failed dlopens
// and searches. requests[i] belongs to p->entries(i).
void AttachPython(v1::ProcessTimeline* p, const std::vector<EntryRequest>& requests,
                  const std::vector<const PyStream*>& streams);

}  // namespace ldscope::model
