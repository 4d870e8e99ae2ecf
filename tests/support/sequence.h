// A traced process's raw events as the compact sequence glibc's elf/tst-audit23 checks
// ("open libc.so.6", "activity ACTIVITY_ADD", "close libfix_b.so ns=N", ...).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"

namespace ldscope::testing {

// The events of a trace file, in sequence order.
std::vector<v1::Event> EventsOf(const std::string& trace);

// One line per event but searches (the timeline tests check those).
std::vector<std::string> Sequence(const std::vector<v1::Event>& events);

// Fills every `bytes` field of m, and of one of each message it holds, with value, but
// for the fields of keep (full names); appends the full names of those filled.
void FillBytes(google::protobuf::Message* m, const std::string& value, const std::set<std::string>& keep,
               std::vector<std::string>* filled, int depth = 0,
               google::protobuf::FieldDescriptor::Type type = google::protobuf::FieldDescriptor::TYPE_BYTES);
// The bytes read from a field filled by FillBytes (the first element when repeated);
// "(absent)" when there is none.
std::string BytesOf(const google::protobuf::Message& m, const std::string& full_name);

}  // namespace ldscope::testing
