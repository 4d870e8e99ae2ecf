// See report_json.h. The JSON is parsed by protobuf into a google.protobuf.Value, then
// set field by field through reflection, each enum word looked up among its enum's words.
#include "support/report_json.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "render/words.h"

namespace ldscope::testing {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Value;

bool Set(const Value& v, Message* m, const FieldDescriptor* f, std::string* why);

bool Object(const Value& v, Message* m, std::string* why) {
  if (v.kind_case() != Value::kStructValue) {
    *why = "not an object where " + m->GetDescriptor()->full_name() + " is";
    return false;
  }
  for (const auto& [key, value] : v.struct_value().fields()) {
    const FieldDescriptor* f = nullptr;
    for (int i = 0; i < m->GetDescriptor()->field_count() && f == nullptr; ++i)
      if (m->GetDescriptor()->field(i)->json_name() == key) f = m->GetDescriptor()->field(i);
    if (f == nullptr) {
      *why = "unknown key " + key + " in " + m->GetDescriptor()->full_name();
      return false;
    }
    if (!Set(value, m, f, why)) return false;
  }
  return true;
}

// One scalar or message value into field f (added to it when repeated).
bool One(const Value& v, Message* m, const FieldDescriptor* f, std::string* why) {
  const auto* r = m->GetReflection();
  const bool rep = f->is_repeated();
  const auto number = [&](double* out) {
    if (v.kind_case() == Value::kNumberValue)
      *out = v.number_value();
    else if (v.kind_case() == Value::kStringValue)
      *out = std::stod(v.string_value());
    else
      return false;
    return true;
  };
  double d = 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      Message* sub = rep ? r->AddMessage(m, f) : r->MutableMessage(m, f);
      return Object(v, sub, why);
    }
    case FieldDescriptor::CPPTYPE_STRING:
      if (v.kind_case() != Value::kStringValue) break;
      rep ? r->AddString(m, f, v.string_value()) : r->SetString(m, f, v.string_value());
      return true;
    case FieldDescriptor::CPPTYPE_BOOL:
      if (v.kind_case() != Value::kBoolValue) break;
      rep ? r->AddBool(m, f, v.bool_value()) : r->SetBool(m, f, v.bool_value());
      return true;
    case FieldDescriptor::CPPTYPE_ENUM:
      if (v.kind_case() != Value::kStringValue) break;
      for (int i = 0; i < f->enum_type()->value_count(); ++i) {
        const auto* e = f->enum_type()->value(i);
        if (render::EnumWord(e) != v.string_value()) continue;
        rep ? r->AddEnumValue(m, f, e->number()) : r->SetEnumValue(m, f, e->number());
        return true;
      }
      *why = "no " + f->enum_type()->full_name() + " has the word " + v.string_value();
      return false;
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT64:
      if (v.kind_case() != Value::kStringValue) break;  // 64-bit integers are strings
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
        const int64_t x = std::stoll(v.string_value());
        rep ? r->AddInt64(m, f, x) : r->SetInt64(m, f, x);
      } else {
        const uint64_t x = std::stoull(v.string_value());
        rep ? r->AddUInt64(m, f, x) : r->SetUInt64(m, f, x);
      }
      return true;
    case FieldDescriptor::CPPTYPE_INT32:
      if (v.kind_case() != Value::kNumberValue) break;
      rep ? r->AddInt32(m, f, static_cast<int32_t>(v.number_value()))
          : r->SetInt32(m, f, static_cast<int32_t>(v.number_value()));
      return true;
    case FieldDescriptor::CPPTYPE_UINT32:
      if (v.kind_case() != Value::kNumberValue) break;
      rep ? r->AddUInt32(m, f, static_cast<uint32_t>(v.number_value()))
          : r->SetUInt32(m, f, static_cast<uint32_t>(v.number_value()));
      return true;
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      if (!number(&d)) break;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE)
        rep ? r->AddDouble(m, f, d) : r->SetDouble(m, f, d);
      else
        rep ? r->AddFloat(m, f, static_cast<float>(d)) : r->SetFloat(m, f, static_cast<float>(d));
      return true;
  }
  *why = "the wrong JSON type for " + f->full_name();
  return false;
}

bool Set(const Value& v, Message* m, const FieldDescriptor* f, std::string* why) {
  if (v.kind_case() == Value::kNullValue) return f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
  if (f->is_map()) {
    if (v.kind_case() != Value::kStructValue) return false;
    const auto* r = m->GetReflection();
    for (const auto& [key, value] : v.struct_value().fields()) {
      Message* e = r->AddMessage(m, f);
      const FieldDescriptor* k = f->message_type()->map_key();
      if (k->cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
        *why = "a map with keys other than strings";
        return false;
      }
      e->GetReflection()->SetString(e, k, key);
      if (!One(value, e, f->message_type()->map_value(), why)) return false;
    }
    return true;
  }
  if (!f->is_repeated()) return One(v, m, f, why);
  if (v.kind_case() != Value::kListValue) {
    *why = f->full_name() + " is not an array";
    return false;
  }
  for (const Value& item : v.list_value().values())
    if (!One(item, m, f, why)) return false;
  return true;
}

}  // namespace

bool ParseJson(const std::string& json, google::protobuf::Message* m, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  Value v;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &v); !s.ok()) {
    *why = std::string(s.message());
    return false;
  }
  m->Clear();
  return Object(v, m, why);
}

}  // namespace ldscope::testing
