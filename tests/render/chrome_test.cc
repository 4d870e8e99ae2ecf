// The Chrome export's slices nest on every track (Perfetto draws a track as a stack):
// a slice that would start inside another and end after it is an async pair instead,
// with the same name and times. On a made-up timeline where a load's estimated end lies
// past the import around it, and on a real traced python3.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "render/render.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using google::protobuf::Struct;

double Num(const Struct& ev, const char* key) {
  auto it = ev.fields().find(key);
  return it == ev.fields().end() ? 0 : it->second.number_value();
}

// Every track's "X" slices nest; returns the async pairs' names ("b" count == "e").
std::vector<std::string> ExpectNested(const std::string& json) {
  Struct doc;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &doc).ok()) << json.substr(0, 300);
  std::map<std::pair<double, double>, std::vector<std::pair<double, double>>> tracks;
  std::vector<std::string> async;
  std::map<double, int> open;
  for (const auto& v : doc.fields().at("traceEvents").list_value().values()) {
    const Struct& ev = v.struct_value();
    const std::string ph = ev.fields().at("ph").string_value();
    if (ph == "X") tracks[{Num(ev, "pid"), Num(ev, "tid")}].push_back({Num(ev, "ts"), Num(ev, "ts") + Num(ev, "dur")});
    if (ph == "b") async.push_back(ev.fields().at("name").string_value()), ++open[Num(ev, "id")];
    if (ph == "e") --open[Num(ev, "id")];
  }
  for (const auto& [id, n] : open) EXPECT_EQ(n, 0) << "async id " << id;
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end(),
              [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> stack;
    for (const auto& [ts, end] : slices) {
      while (!stack.empty() && stack.back() <= ts + 1e-6) stack.pop_back();
      EXPECT_TRUE(stack.empty() || end <= stack.back() + 1e-6)
          << "pid " << track.first << " tid " << track.second << ": [" << ts << ", " << end
          << ") overlaps its parent, which ends at " << stack.back();
      stack.push_back(end);
    }
  }
  return async;
}

TEST(Chrome, ASliceThatOutlivesItsParentIsAsync) {
  v1::Timeline t;
  v1::ProcessTimeline* p = t.add_processes();
  p->set_pid(10);
  p->set_stream(1);
  // A load at 5 us whose end is the thread's next event, at 30 us ...
  v1::Entry* e = p->add_entries();
  e->set_tid(10);
  e->set_offset_ns(5000);
  e->mutable_load()->set_reason(v1::LOAD_NEEDED);
  e->mutable_load()->mutable_object()->set_path("/lib/libx.so");
  v1::Entry* next = p->add_entries();
  next->set_tid(10);
  next->set_offset_ns(30000);
  next->mutable_failed_dlopen()->set_requested_name("liby.so");
  // ... inside an import that ended at 20 us.
  v1::PyImportSpan* im = p->add_imports();
  im->set_module("x");
  im->set_tid(10);
  im->set_start_offset_ns(1000);
  im->set_end_offset_ns(20000);
  im->set_ended(true);
  const std::string json = render::ChromeTrace(t, v1::Report());
  EXPECT_EQ(ExpectNested(json), std::vector<std::string>{"libx.so"}) << json;
}

TEST(Chrome, RealPythonTraceNests) {
  const auto dir = testing::ScratchDir("chrome_nesting");
  const std::string trace = dir + "/t.ldscope";
  ASSERT_EQ(testing::RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", "/usr/bin/python3", "-c",
                             "import ctypes, decimal, json, sqlite3, ssl, xml.etree.ElementTree"})
                .code,
            0);
  ASSERT_EQ(testing::RunCmd({LDSCOPE_BIN, "export", "--chrome", trace, "-o", dir + "/c.json"}).code, 0);
  ExpectNested(testing::ReadFile(dir + "/c.json"));
}

}  // namespace
}  // namespace ldscope
