// `ldscope export --chrome`: valid JSON in the trace-event format, with the spans and
// markers a person looks for in Perfetto.
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const google::protobuf::Value* Find(const google::protobuf::ListValue& evs, const std::string& name,
                                    const std::string& ph) {
  for (const auto& v : evs.values()) {
    const auto& f = v.struct_value().fields();
    if (f.count("name") && f.at("name").string_value() == name && f.at("ph").string_value() == ph)
      return &v;
  }
  return nullptr;
}

TEST(Export, ChromeTraceHasTheSpansAndMarkers) {
  const auto dir = testing::ScratchDir("export_chrome");
  const auto trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", "/usr/bin/python3",
                    SCENARIOS_DIR "/cupy_then_torch.py", FIXTURES}).code, 0);
  const auto r = RunCmd({LDSCOPE_BIN, "export", "--chrome", trace, "-o", dir + "/out.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(testing::ReadFile(dir + "/out.json"), &doc).ok())
      << "valid JSON";
  ASSERT_TRUE(doc.fields().count("traceEvents"));
  const auto& evs = doc.fields().at("traceEvents").list_value();
  // A ctypes dlopen's span is named after the Python call that made it.
  const auto* span = Find(evs, "ctypes.CDLL('" FIXTURES "/site-packages/torch/lib/libtorch_cuda.so')", "X");
  ASSERT_NE(span, nullptr);
  const auto& sf = span->struct_value().fields();
  EXPECT_TRUE(sf.at("args").struct_value().fields().at("rolled_back").bool_value());
  const auto* load = Find(evs, "libtorch_cuda.so", "X");
  ASSERT_NE(load, nullptr);
  const auto& lf = load->struct_value().fields();
  // The load lies inside its dlopen's span, on the same track.
  EXPECT_EQ(lf.at("pid").number_value(), sf.at("pid").number_value());
  EXPECT_EQ(lf.at("tid").number_value(), sf.at("tid").number_value());
  EXPECT_GE(lf.at("ts").number_value(), sf.at("ts").number_value());
  EXPECT_LE(lf.at("ts").number_value(), sf.at("ts").number_value() + sf.at("dur").number_value());
  EXPECT_NE(Find(evs, "ctypes.CDLL('" FIXTURES "/system/lib/libnccl.so.2.16.2')", "X"), nullptr);
  EXPECT_NE(Find(evs, "FAILED dlopen libtorch_cuda.so", "i"), nullptr);
  EXPECT_NE(Find(evs, "missing-symbol", "i"), nullptr);
  EXPECT_NE(Find(evs, "process_name", "M"), nullptr);
  EXPECT_NE(Find(evs, "thread_name", "M"), nullptr);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "export", "--chrome", dir + "/missing.ldscope", "-o", dir + "/x.json"}).code, 2);
}

// The whole export of a small trace (dlprobe: a dlopen with a NEEDED library, a dlopen
// that is rolled back, a dlclose), against a golden file. Times, pids and thread ids
// are normalised; every name, argument and the layout are compared.
TEST(Export, ChromeTraceGolden) {
  const auto dir = testing::ScratchDir("export_chrome_golden");
  const auto trace = dir + "/t.ldscope";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", DLPROBE, "open",
                         FIXTURES "/lib/libfix_a.so", "open", FIXTURES "/lib/libfix_bad.so", "noload",
                         "libfix_b.so", "close"},
                        {}, {"LD_LIBRARY_PATH", "LD_PRELOAD"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto e = RunCmd({LDSCOPE_BIN, "export", "--chrome", trace, "-o", dir + "/out.json"});
  ASSERT_EQ(e.code, 0) << e.err;
  testing::ExpectGolden("export_chrome_dlprobe.json",
                        testing::ReadFile(dir + "/out.json"));
}

}  // namespace
}  // namespace ldscope
