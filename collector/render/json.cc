// See render.h.
#include <memory>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver_util.h>

#include "render/render.h"

namespace ldscope::render {

// What MessageToJsonString does (the message's wire form, printed as JSON through a type
// resolver), with the wire form deterministic: protobuf's JSON writer prints a map (a
// process's environment, a Struct's fields) in the order of its wire form, which is
// sorted by key only then. Otherwise the order changes from run to run.
std::string Json(const google::protobuf::Message& m) {
  std::string wire;
  {
    google::protobuf::io::StringOutputStream out(&wire);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  static const std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          "type.googleapis.com", google::protobuf::DescriptorPool::generated_pool()));
  google::protobuf::util::JsonPrintOptions opt;
  opt.add_whitespace = true;
  opt.preserve_proto_field_names = false;
  std::string out;
  if (!google::protobuf::util::BinaryToJsonString(resolver.get(),
                                                  "type.googleapis.com/" + m.GetDescriptor()->full_name(),
                                                  wire, &out, opt)
           .ok())
    return "{}\n";
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

}  // namespace ldscope::render
