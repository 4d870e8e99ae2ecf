// The header a trace file starts with, read from its first 4 KiB alone (for deciding
// what a file is before reading it whole).
#pragma once

#include <string>

#include "ldscope_proto/events.pb.h"

namespace ldscope::store {

enum class HeaderRead { kNone, kParsed, kLonger };

// kParsed: *out holds the header; kLonger: the header runs past the first 4 KiB (not
// parsed); kNone: not a regular file, unreadable, or no header there.
HeaderRead ReadTraceHeader(const std::string& path, v1::TraceHeader* out);

}  // namespace ldscope::store
