// See render.h. The JSON every command prints (report, imports, diff, show): written
// from the message's descriptor, so that the schema (docs/report.schema.json) follows
// from report.proto and the words from the enums (words.h).
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver_util.h>

#include "render/render.h"
#include "render/words.h"
#include "text/escape.h"

namespace ldscope::render {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The length of a well-formed UTF-8 sequence at s[i], 0 when there is none.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xc0) == 0x80; };
  if (c >= 0xc2 && c <= 0xdf) return cont(i + 1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if ((c == 0xe0 && b(i + 1) < 0xa0) || (c == 0xed && b(i + 1) > 0x9f)) return 0;  // overlong, surrogate
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if ((c == 0xf0 && b(i + 1) < 0x90) || (c == 0xf4 && b(i + 1) > 0x8f)) return 0;
    return 4;
  }
  return 0;
}

class Writer {
 public:
  std::string Take() { return std::move(out_); }

  void Object(const Message& m, int depth) {
    const auto* d = m.GetDescriptor();
    const Reflection* r = m.GetReflection();
    out_ += '{';
    bool first = true;
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      // Every field, set or not (a reader finds each key), but of a oneof only the one
      // set: the others are not absent values, they are other shapes.
      if (f->real_containing_oneof() != nullptr && !r->HasField(m, f)) continue;
      out_ += first ? "" : ",";
      first = false;
      Indent(depth + 1);
      String(f->json_name());
      out_ += ": ";
      Field(m, f, depth + 1);
    }
    if (!first) Indent(depth);
    out_ += '}';
  }

  void String(std::string_view s) {
    out_ += '"';
    for (size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7f) {
        out_ += fmt::format("\\u{:04x}", c);
      } else if (c >= 0x80) {
        // Bytes that are not UTF-8 (text is escaped, so this is rare) print as the text
        // escaper writes them: \xNN, a backslash escaped here.
        if (const size_t n = Utf8Length(s, i); n != 0) {
          out_.append(s.substr(i, n));
          i += n;
          continue;
        }
        out_ += fmt::format("\\\\x{:02x}", c);
      } else {
        out_ += static_cast<char>(c);
      }
      ++i;
    }
    out_ += '"';
  }

 private:
  void Indent(int depth) {
    out_ += '\n';
    out_.append(static_cast<size_t>(depth), ' ');
  }

  void Field(const Message& m, const FieldDescriptor* f, int depth) {
    const Reflection* r = m.GetReflection();
    if (f->is_map()) return Map(m, f, depth);
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      out_ += '[';
      for (int k = 0; k < n; ++k) {
        out_ += k == 0 ? "" : ",";
        Indent(depth + 1);
        Value(m, f, k, depth + 1);
      }
      if (n > 0) Indent(depth);
      out_ += ']';
      return;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !r->HasField(m, f)) {
      out_ += "null";
      return;
    }
    Value(m, f, -1, depth);
  }

  // A map as an object, sorted by key (the same message prints the same bytes).
  void Map(const Message& m, const FieldDescriptor* f, int depth) {
    const Reflection* r = m.GetReflection();
    const FieldDescriptor* key = f->message_type()->map_key();
    const FieldDescriptor* value = f->message_type()->map_value();
    std::vector<std::pair<std::string, const Message*>> entries;
    for (int k = 0; k < r->FieldSize(m, f); ++k) {
      const Message& e = r->GetRepeatedMessage(m, f, k);
      entries.emplace_back(Key(e, key), &e);
    }
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    out_ += '{';
    for (size_t k = 0; k < entries.size(); ++k) {
      out_ += k == 0 ? "" : ",";
      Indent(depth + 1);
      String(entries[k].first);
      out_ += ": ";
      Value(*entries[k].second, value, -1, depth + 1);
    }
    if (!entries.empty()) Indent(depth);
    out_ += '}';
  }

  static std::string Key(const Message& e, const FieldDescriptor* key) {
    const Reflection* r = e.GetReflection();
    switch (key->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        return r->GetString(e, key);
      case FieldDescriptor::CPPTYPE_INT32:
        return std::to_string(r->GetInt32(e, key));
      case FieldDescriptor::CPPTYPE_UINT32:
        return std::to_string(r->GetUInt32(e, key));
      case FieldDescriptor::CPPTYPE_INT64:
        return std::to_string(r->GetInt64(e, key));
      case FieldDescriptor::CPPTYPE_UINT64:
        return std::to_string(r->GetUInt64(e, key));
      case FieldDescriptor::CPPTYPE_BOOL:
        return r->GetBool(e, key) ? "true" : "false";
      default:
        return "";
    }
  }

  // One value: of a repeated field at index k, else (k < 0) of a singular one. 64-bit
  // integers print as strings (JSON readers hold numbers as doubles: 2^53 and above
  // would change), as in protobuf's JSON mapping.
  void Value(const Message& m, const FieldDescriptor* f, int k, int depth) {
    const Reflection* r = m.GetReflection();
    const bool rep = k >= 0;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        out_ += std::to_string(rep ? r->GetRepeatedInt32(m, f, k) : r->GetInt32(m, f));
        return;
      case FieldDescriptor::CPPTYPE_UINT32:
        out_ += std::to_string(rep ? r->GetRepeatedUInt32(m, f, k) : r->GetUInt32(m, f));
        return;
      case FieldDescriptor::CPPTYPE_INT64:
        String(std::to_string(rep ? r->GetRepeatedInt64(m, f, k) : r->GetInt64(m, f)));
        return;
      case FieldDescriptor::CPPTYPE_UINT64:
        String(std::to_string(rep ? r->GetRepeatedUInt64(m, f, k) : r->GetUInt64(m, f)));
        return;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return Number(rep ? r->GetRepeatedDouble(m, f, k) : r->GetDouble(m, f));
      case FieldDescriptor::CPPTYPE_FLOAT:
        return Number(rep ? r->GetRepeatedFloat(m, f, k) : r->GetFloat(m, f));
      case FieldDescriptor::CPPTYPE_BOOL:
        out_ += (rep ? r->GetRepeatedBool(m, f, k) : r->GetBool(m, f)) ? "true" : "false";
        return;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const int n = rep ? r->GetRepeatedEnumValue(m, f, k) : r->GetEnumValue(m, f);
        const auto* v = f->enum_type()->FindValueByNumber(n);
        String(v != nullptr ? EnumWord(v) : std::to_string(n));  // a newer writer's value
        return;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        std::string scratch;
        const std::string& s =
            rep ? r->GetRepeatedStringReference(m, f, k, &scratch) : r->GetStringReference(m, f, &scratch);
        if (f->type() == FieldDescriptor::TYPE_BYTES) return String(Hex(s));
        return String(s);
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return Object(rep ? r->GetRepeatedMessage(m, f, k) : r->GetMessage(m, f), depth);
    }
  }

  // The shortest text that reads back as the same double; JSON has no NaN or infinity.
  void Number(double v) {
    if (v != v || v - v != 0) {
      out_ += "null";
      return;
    }
    out_ += fmt::format("{}", v);
  }

  static std::string Hex(std::string_view bytes) {
    std::string out;
    for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
    return out;
  }

  std::string out_;
};

}  // namespace

void EscapeByteFields(Message* m, std::initializer_list<std::string_view> text) {
  const auto named = [&](const std::string& name) { return std::find(text.begin(), text.end(), name) != text.end(); };
  if (named(m->GetDescriptor()->full_name())) return;
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  std::string scratch;
  for (const FieldDescriptor* f : fields) {
    if (named(f->full_name())) continue;
    const int n = f->is_repeated() ? r->FieldSize(*m, f) : 1;
    for (int k = 0; k < n; ++k) {
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        EscapeByteFields(f->is_repeated() ? r->MutableRepeatedMessage(m, f, k) : r->MutableMessage(m, f), text);
        continue;
      }
      if (f->type() != FieldDescriptor::TYPE_STRING) continue;
      const std::string& s =
          f->is_repeated() ? r->GetRepeatedStringReference(*m, f, k, &scratch) : r->GetStringReference(*m, f, &scratch);
      if (text::PlainAscii(s)) continue;  // its own escape: left as it is, not copied
      if (f->is_repeated())
        r->SetRepeatedString(m, f, k, text::Escape(s));
      else
        r->SetString(m, f, text::Escape(s));
    }
  }
}

v1::Timeline ShownTimeline(const v1::Timeline& t) {
  v1::Timeline shown = t;
  EscapeByteFields(&shown, {"ldscope.v1.TraceProblem"});
  return shown;
}

std::string Json(const google::protobuf::Message& m) {
  Writer w;
  w.Object(m, 0);
  std::string out = w.Take();
  out += '\n';
  return out;
}

// What MessageToJsonString does (the message's wire form, printed as JSON through a type
// resolver), with the wire form deterministic: protobuf's JSON writer prints a map (a
// process's environment, a Struct's fields) in the order of its wire form, which is
// sorted by key only then. Otherwise the order changes from run to run.
std::string ProtoJson(const google::protobuf::Message& m) {
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
