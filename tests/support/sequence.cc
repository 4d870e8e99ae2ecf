// See sequence.h.
#include "support/sequence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "store/trace_file.h"

namespace ldscope::testing {
namespace {

std::string Describe(const v1::Event& e, const std::map<uint64_t, std::string>& names) {
  auto name = [&](uint64_t id) {
    auto it = names.find(id);
    return it == names.end() ? std::to_string(id) : it->second;
  };
  switch (e.body_case()) {
    case v1::Event::kProcessStart: return "start";
    case v1::Event::kSearch: return "";
    case v1::Event::kObjopen: return "open " + name(e.objopen().id());
    case v1::Event::kObjclose:
      return "close " + name(e.objclose().id()) + (e.objclose().unrelocated() ? " unrelocated" : "");
    case v1::Event::kActivity:
      return std::string("activity ") + v1::ActivityKind_Name(e.activity().kind());
    case v1::Event::kPreinit: return "preinit";
    case v1::Event::kExit: return "exit";
    default: return "?";
  }
}

}  // namespace

std::vector<v1::Event> EventsOf(const std::string& trace) {
  auto t = store::ReadTraceFile(trace);
  EXPECT_TRUE(t.ok()) << t.problem->message;
  // The collector's own records (notes, mount and owner facts) are not a process's events.
  std::erase_if(t.events,
                [](const v1::Event& e) { return e.has_collector() || e.has_mount_facts() || e.has_owner_facts(); });
  std::sort(t.events.begin(), t.events.end(),
            [](const v1::Event& a, const v1::Event& b) { return a.seq() < b.seq(); });
  return t.events;
}

std::vector<std::string> Sequence(const std::vector<v1::Event>& events) {
  std::map<uint64_t, std::string> names;
  std::vector<std::string> out;
  for (const auto& e : events) {
    if (e.has_objopen()) {
      const auto& o = e.objopen();
      std::string p = o.is_main() ? "MAIN" : o.is_ldso() ? "LDSO" : o.is_vdso() ? "VDSO" : o.path();
      names[o.id()] = p.substr(p.rfind('/') + 1) + (o.lmid() == 0 ? "" : " ns=N");
    }
    std::string d = Describe(e, names);
    if (!d.empty()) out.push_back(d);
  }
  return out;
}

void FillBytes(google::protobuf::Message* m, const std::string& value, const std::set<std::string>& keep,
               std::vector<std::string>* filled, int depth, google::protobuf::FieldDescriptor::Type type) {
  const auto* d = m->GetDescriptor();
  const auto* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (keep.count(f->full_name()) != 0) continue;
    if (f->type() == type) {
      if (f->is_repeated())
        r->AddString(m, f, value);
      else
        r->SetString(m, f, value);
      filled->push_back(f->full_name());
    } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map() && depth < 3) {
      FillBytes(f->is_repeated() ? r->AddMessage(m, f) : r->MutableMessage(m, f), value, keep, filled, depth + 1, type);
    }
  }
}

std::string BytesOf(const google::protobuf::Message& m, const std::string& full_name) {
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->full_name() == full_name) return f->is_repeated() ? r->GetRepeatedString(m, f, 0) : r->GetString(m, f);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE || f->is_map()) continue;
    if (f->is_repeated() ? r->FieldSize(m, f) == 0 : !r->HasField(m, f)) continue;
    const std::string in = BytesOf(f->is_repeated() ? r->GetRepeatedMessage(m, f, 0) : r->GetMessage(m, f), full_name);
    if (in != "(absent)") return in;
  }
  return "(absent)";
}

}  // namespace ldscope::testing
