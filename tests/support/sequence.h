// A traced process's raw events as the compact sequence glibc's elf/tst-audit23 checks
// ("open libc.so.6", "activity ACTIVITY_ADD", "close libfix_b.so ns=N", ...).
#pragma once

#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"

namespace ldscope::testing {

// The events of a trace file, in sequence order.
std::vector<v1::Event> EventsOf(const std::string& trace);

// One line per event but searches (the timeline tests check those).
std::vector<std::string> Sequence(const std::vector<v1::Event>& events);

}  // namespace ldscope::testing
