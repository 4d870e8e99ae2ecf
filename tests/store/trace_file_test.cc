// Trace files: written by the collector's writer, read back whole; damaged files give
// an error with the byte offset and keep everything before the damage.
#include <gtest/gtest.h>

#include "store/trace_file.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

std::string WriteSample(const std::string& dir, int events) {
  const std::string path = dir + "/t.ldscope";
  store::TraceWriter w;
  v1::TraceHeader h;
  h.set_format_version(1);
  h.set_host("h");
  EXPECT_TRUE(w.Open(path, h).ok());
  for (int i = 0; i < events; ++i) {
    v1::Event e;
    e.set_pid(10);
    e.set_seq(static_cast<uint64_t>(i));
    e.mutable_search()->set_name("libx.so." + std::to_string(i));
    const std::string bytes = e.SerializeAsString();
    EXPECT_TRUE(w.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 3).ok());
  }
  EXPECT_TRUE(w.Close().ok());
  return path;
}

TEST(TraceFile, RoundTripAddsStream) {
  const auto dir = testing::ScratchDir("trace_roundtrip");
  const auto t = store::ReadTraceFile(WriteSample(dir, 5));
  ASSERT_TRUE(t.ok()) << t.problem->message;
  EXPECT_EQ(t.header.host(), "h");
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[4].search().name(), "libx.so.4");
  EXPECT_EQ(t.events[4].stream(), 3u);
}

TEST(TraceFile, EveryTruncationKeepsThePrefixAndNamesTheOffset) {
  const auto dir = testing::ScratchDir("trace_truncated");
  const std::string full = testing::ReadFile(WriteSample(dir, 20));
  // Record boundaries, to know how many events a prefix must still hold.
  const auto whole = store::ParseTrace("x", reinterpret_cast<const uint8_t*>(full.data()), full.size());
  ASSERT_TRUE(whole.ok());
  for (size_t cut = 1; cut < full.size(); ++cut) {
    const auto t = store::ParseTrace("x", reinterpret_cast<const uint8_t*>(full.data()), cut);
    // A cut exactly at a record boundary is indistinguishable from a shorter file.
    if (t.ok()) {
      EXPECT_LT(t.events.size(), 20u);
      continue;
    }
    EXPECT_LE(t.problem->offset, cut);
    EXPECT_FALSE(t.problem->message.empty());
    // Everything before the damaged record is there.
    size_t expected = 0;
    for (size_t pos = 0, i = 0; i <= 20; ++i) {
      const uint8_t len = static_cast<uint8_t>(full[pos]);  // records here are < 128 bytes
      if (pos + 1 + len > cut) break;
      if (i > 0) ++expected;
      pos += 1 + len;
    }
    EXPECT_EQ(t.events.size(), expected) << "cut at " << cut;
  }
}

// The ELF facts records are kept as the file's bytes (decoded when a lookup needs one):
// a record comes back byte for byte, the events around it are read, and a record that is
// not a well-formed message at its top level stops reading at its offset, as any corrupt
// event does.
TEST(TraceFile, FactsRecordsKeptAsBytesAndCheckedAtTheTop) {
  v1::TraceHeader h;
  h.set_format_version(1);
  h.set_host("h");
  v1::ObjectFacts facts;
  facts.add_paths("/lib/libx.so.1");
  facts.set_build_id(std::string("\x01\x02\x03", 3));
  facts.set_size(1234);
  facts.add_needed("libc.so.6");
  facts.add_verneeds()->set_file("libc.so.6");
  auto record = [](const std::string& bytes) {
    std::string out;
    for (uint64_t n = bytes.size(); ; n >>= 7) {
      out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
      if (n < 0x80) break;
    }
    return out + bytes;
  };
  v1::Event before, with_facts, after;
  before.set_pid(10);
  before.mutable_search()->set_name("libx.so.1");
  with_facts.set_pid(10);
  *with_facts.mutable_object_facts() = facts;
  after.set_pid(10);
  after.mutable_search()->set_name("liby.so.1");
  const std::string head = record(h.SerializeAsString()) + record(before.SerializeAsString());
  std::string file = head + record(with_facts.SerializeAsString()) + record(after.SerializeAsString());
  auto t = store::ParseTrace("x", reinterpret_cast<const uint8_t*>(file.data()), file.size());
  ASSERT_TRUE(t.ok()) << t.problem->message;
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[1].search().name(), "liby.so.1");
  ASSERT_EQ(t.facts.size(), 1u);
  EXPECT_EQ(t.facts[0], facts.SerializeAsString());

  // A facts record whose last field's length runs past its end.
  std::string bad = facts.SerializeAsString();
  bad += std::string("\x0a\x05" "ab", 4);  // paths, 5 bytes declared, 2 present
  v1::Event bad_event;
  bad_event.set_pid(10);
  std::string bad_record = bad_event.SerializeAsString();
  bad_record += static_cast<char>(((31 << 3 | 2) & 0x7f) | 0x80);
  bad_record += static_cast<char>((31 << 3 | 2) >> 7);
  bad_record += record(bad);
  file = head + record(bad_record) + record(after.SerializeAsString());
  t = store::ParseTrace("x", reinterpret_cast<const uint8_t*>(file.data()), file.size());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.problem->message, "corrupt event record");
  EXPECT_EQ(t.problem->offset, head.size());
  EXPECT_EQ(t.events.size(), 1u);
  EXPECT_TRUE(t.facts.empty());
}

TEST(TraceFile, GarbageIsReportedNotFatal) {
  const auto dir = testing::ScratchDir("trace_garbage");
  std::string data = testing::ReadFile(WriteSample(dir, 3));
  const size_t good = data.size();
  data += std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
  const auto t = store::ParseTrace("g", reinterpret_cast<const uint8_t*>(data.data()), data.size());
  EXPECT_FALSE(t.ok());
  EXPECT_EQ(t.problem->offset, good);
  EXPECT_EQ(t.events.size(), 3u);
  const std::string junk = "this is not a trace at all";
  const auto j = store::ParseTrace("j", reinterpret_cast<const uint8_t*>(junk.data()), junk.size());
  EXPECT_FALSE(j.ok());
  EXPECT_EQ(j.problem->offset, 0u);
}

// `ldscope show` on a damaged file: the readable part on stdout, the offset on stderr.
TEST(TraceFile, ShowPrintsWhatPrecedesTheDamage) {
  const auto dir = testing::ScratchDir("trace_show_damaged");
  const auto trace = dir + "/run.ldscope";
  auto r = testing::RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open",
                         FIXTURES "/lib/libfix_a.so"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string data = testing::ReadFile(trace);
  const std::string cut = data.substr(0, data.size() - 3);
  testing::WriteFile(dir + "/cut.ldscope", cut);
  auto s = testing::RunCmd({LDSCOPE_BIN, "show", dir + "/cut.ldscope"});
  EXPECT_EQ(s.code, 1);
  EXPECT_NE(s.out.find("libfix_a.so"), std::string::npos) << s.out;
  EXPECT_NE(s.err.find("at byte offset"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("truncated record"), std::string::npos) << s.err;
  auto missing = testing::RunCmd({LDSCOPE_BIN, "show", dir + "/nope.ldscope"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("No such file"), std::string::npos);
}

}  // namespace
}  // namespace ldscope
