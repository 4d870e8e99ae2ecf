// render::Json: every field printed (empty ones too), enums as words, 64-bit integers as
// strings, and read back whole by the reader a user's tool would write
// (tests/support/report_json.h).
#include <gtest/gtest.h>

#include <set>

#include <google/protobuf/util/message_differencer.h>

#include "render/render.h"
#include "render/words.h"
#include "support/report_json.h"

namespace ldscope {
namespace {

TEST(Json, EmptyReportHasEveryKey) {
  const std::string j = render::ReportJson(v1::Report());
  for (const char* key : {"\"schemaVersion\": \"1.0\"", "\"findings\": []", "\"notes\": []", "\"errors\": 0",
                          "\"kinds\": {}", "\"ldscopeVersion\": \""})
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
}

TEST(Json, WordsAndReadBack) {
  v1::Report r;
  v1::Finding* f = r.add_findings();
  f->set_kind(v1::RUNTIME_FAMILY);
  f->set_severity(v1::WARNING);
  f->set_pid(7);
  f->add_evidence(uint64_t{1} << 60);
  v1::Library* o = f->add_objects();
  o->set_path("/x/libf\\xff\\n.so \"q\" <a>");
  o->set_lmid(-1);
  o->set_at_ms(1.25);
  o->mutable_python()->set_import_module("torch");
  v1::MissingSymbol* m = f->add_missing();
  m->set_cause(v1::CAUSE_CXX_ABI);
  f->add_fixes()->set_action("preload-by-path");
  r.add_notes("a note\twith a tab");
  const std::string j = render::Json(r);
  for (const char* piece : {"\"kind\": \"runtime-family\"", "\"severity\": \"warning\"", "\"cause\": \"cxx-abi\"",
                            "\"evidence\": [\n    \"1152921504606846976\"\n   ]", "\"lmid\": \"-1\"", "\"atMs\": 1.25",
                            "\"callSite\": null", "\"a note\\u0009with a tab\"", "\\\"q\\\" <a>"})
    EXPECT_NE(j.find(piece), std::string::npos) << piece << " in " << j;
  v1::Report back;
  std::string why;
  ASSERT_TRUE(testing::ParseJson(j, &back, &why)) << why;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back, r)) << back.DebugString();
}

// Every value of the enums a report prints has a word of its own (no two alike), and
// the finding kinds' words are --fail-on's.
TEST(Json, EveryEnumValueHasAWord) {
  for (const auto* e : {v1::FindingKind_descriptor(), v1::Severity_descriptor(), v1::MissingCause_descriptor(),
                        v1::LoadReason_descriptor(), v1::CandidateStep_descriptor(), v1::StartReason_descriptor()}) {
    std::set<std::string> seen;
    for (int i = 0; i < e->value_count(); ++i) {
      const std::string w = render::EnumWord(e->value(i));
      EXPECT_FALSE(w.empty()) << e->value(i)->full_name();
      EXPECT_TRUE(seen.insert(w).second) << w << " twice in " << e->full_name();
      EXPECT_EQ(w.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-"), std::string::npos) << w;
    }
  }
  EXPECT_EQ(render::FindingKindName(v1::DLOPEN_OUT_OF_SCOPE), "dlopen-out-of-scope");
  EXPECT_EQ(render::EnumWord(v1::CAUSE_PYTHON_API), "python-api");
  EXPECT_EQ(render::EnumWord(v1::START_RECONNECT), "reconnect");
  EXPECT_EQ(render::EnumWord(v1::MISSING_CAUSE_UNSPECIFIED), "unspecified");
}

}  // namespace
}  // namespace ldscope
