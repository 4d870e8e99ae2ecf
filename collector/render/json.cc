// See render.h.
#include <google/protobuf/util/json_util.h>

#include "render/render.h"

namespace ldscope::render {

std::string Json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions opt;
  opt.add_whitespace = true;
  opt.preserve_proto_field_names = false;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(m, &out, opt).ok()) return "{}\n";
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

}  // namespace ldscope::render
