// render::Json: every field printed (empty ones too), enums as words, 64-bit integers as
// strings, and read back whole by the reader a user's tool would write
// (tests/support/report_json.h).
#include <gtest/gtest.h>

#include <set>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include "render/render.h"
#include "render/words.h"
#include "support/report_json.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

TEST(Json, EmptyReportHasEveryKey) {
  const std::string j = render::ReportJson(v1::Report());
  for (const char* key : {"\"schemaVersion\": \"1.1\"", "\"findings\": []", "\"notes\": []", "\"errors\": 0",
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
  f->add_fixes()->set_action(v1::FIX_PRELOAD_BY_PATH);
  r.add_notes("a note\twith a tab");
  const std::string j = render::Json(r);
  for (const char* piece :
       {"\"kind\": \"runtime-family\"", "\"severity\": \"warning\"", "\"cause\": \"cxx-abi\"",
        "\"evidence\": [\n    \"1152921504606846976\"\n   ]", "\"lmid\": \"-1\"", "\"atMs\": 1.25",
        "\"callSite\": null", "\"action\": \"preload-by-path\"", "\"a note\\u0009with a tab\"", "\\\"q\\\" <a>"})
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
                        v1::LoadReason_descriptor(), v1::CandidateStep_descriptor(), v1::StartReason_descriptor(),
                        v1::FixAction_descriptor()}) {
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
  EXPECT_EQ(render::EnumWord(v1::FIX_DROP_FROM_LD_LIBRARY_PATH), "drop-from-ld-library-path");
}

// The published schema (docs/report.schema.json) lists exactly the words of the finding
// kinds and fix actions, in the schema's order, the unspecified value left out.
TEST(Json, SchemaListsEveryKindAndAction) {
  google::protobuf::Struct schema;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(testing::ReadFile(PROJECT_SOURCE "/docs/report.schema.json"), &schema)
          .ok());
  const auto& defs = schema.fields().at("$defs").struct_value().fields();
  const std::pair<const char*, const google::protobuf::EnumDescriptor*> enums[] = {
      {"kind", v1::FindingKind_descriptor()}, {"fixAction", v1::FixAction_descriptor()}};
  for (const auto& [def, e] : enums) {
    ASSERT_TRUE(defs.count(def)) << def;
    std::vector<std::string> listed, words;
    for (const auto& v : defs.at(def).struct_value().fields().at("enum").list_value().values())
      listed.push_back(v.string_value());
    for (int i = 0; i < e->value_count(); ++i)
      if (e->value(i)->number() != 0) words.push_back(render::EnumWord(e->value(i)));
    EXPECT_EQ(listed, words) << def << " in docs/report.schema.json against " << e->full_name();
  }
}

}  // namespace
}  // namespace ldscope
