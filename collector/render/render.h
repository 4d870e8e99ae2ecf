// Renderers: turn timeline (and later report) messages into text for people or JSON
// for machines. No analysis happens here; nothing else prints.
#pragma once

#include <string>

#include <google/protobuf/message.h>

#include "ldscope_proto/timeline.pb.h"

namespace ldscope::render {

// The proto3 JSON mapping of any message, pretty-printed, with a trailing newline.
std::string Json(const google::protobuf::Message& m);

struct TextOptions {
  bool timestamps = true;  // "+1.234ms" columns (off for golden files)
  bool verbose = false;    // list every unload at exit and every reuse
};
std::string TimelineText(const v1::Timeline& t, const TextOptions& opt);

}  // namespace ldscope::render
