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

}  // namespace ldscope::testing
