// What reading a record adds to its decoded event: the audit library's wire economies
// undone (times, search names, interned candidate directories), within a bound on what
// resolution may add (docs/ARCHITECTURE.md, "Bounds on reading a trace"). Internal to
// the store (trace_file.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "ldscope_proto/events.pb.h"

namespace ldscope::store {

// The state of one stream's resolution (see Apply).
struct Resolution {
  uint64_t image_start = 0;
  std::unordered_map<uint32_t, std::string> dirs;
  std::string name;
  uint64_t budget = 0;  // bytes resolution may still add
};

// Undoes the audit library's wire economies of one event of a stream; apply a stream's
// events in seq order, each with its record's size.
void Apply(Resolution& r, size_t record_size, v1::Event* e);

}  // namespace ldscope::store
