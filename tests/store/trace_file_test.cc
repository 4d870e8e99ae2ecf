// Trace files: written by the collector's writer, read back whole; damaged files give
// an error with the byte offset and keep everything before the damage.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include "model/timeline.h"
#include "store/trace_file.h"
#include "support/sequence.h"
#include "support/test_support.h"
#include "text/escape.h"

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

// A trace of many records is checked in blocks, on several threads: reading still stops
// at the first damaged record, in file order, keeping every record before it, whether the
// damage is a record that does not decode or a length prefix that runs past the end, and
// whichever comes first.
TEST(TraceFile, ABigTraceStopsAtItsFirstDamageAsRecordByRecord) {
  const auto dir = testing::ScratchDir("trace_big_damage");
  constexpr int kEvents = 60000;  // several blocks of records for the threads
  const std::string full = testing::ReadFile(WriteSample(dir, kEvents));
  std::vector<size_t> starts;  // record i's length prefix (0: the header)
  for (size_t pos = 0; pos < full.size();) {
    starts.push_back(pos);
    size_t len = 0, shift = 0, p = pos;
    for (uint8_t b = 0x80; b & 0x80; shift += 7) {
      b = static_cast<uint8_t>(full[p++]);
      len |= static_cast<size_t>(b & 0x7f) << shift;
    }
    pos = p + len;
  }
  ASSERT_EQ(starts.size(), kEvents + 1u);
  auto body = [&](size_t record) { return starts[record] + 1; };  // records here are < 128 bytes
  auto read = [](const std::string& bytes) {
    return store::ParseTrace("x", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), true);
  };
  // A record that does not decode (a field tag with wire type 7), late in the file.
  std::string corrupt = full;
  corrupt[body(41234)] = static_cast<char>(0x0f);
  auto t = read(corrupt);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.problem->offset, starts[41234]);
  EXPECT_EQ(t.problem->message, "corrupt event record");
  EXPECT_EQ(store::EventCount(t), 41233u);
  // The same, and a later cut: the corrupt record comes first.
  t = read(corrupt.substr(0, starts[50000] + 2));
  EXPECT_EQ(t.problem->offset, starts[41234]);
  EXPECT_EQ(store::EventCount(t), 41233u);
  // A cut alone: every whole record before it.
  t = read(full.substr(0, starts[50000] + 2));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.problem->offset, starts[50000]);
  EXPECT_EQ(store::EventCount(t), 49999u);
  // Damage in the first record after the header, and in the last.
  std::string first = full;
  first[body(1)] = static_cast<char>(0x0f);
  EXPECT_EQ(read(first).problem->offset, starts[1]);
  EXPECT_EQ(store::EventCount(read(first)), 0u);
  std::string last = full;
  last[body(kEvents)] = static_cast<char>(0x0f);
  EXPECT_EQ(read(last).problem->offset, starts[kEvents]);
  EXPECT_EQ(store::EventCount(read(last)), kEvents - 1u);
  // Whole: every event, in one stream, in seq order.
  t = read(full);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t.streams.size(), 1u);
  ASSERT_EQ(t.streams[0].records.size(), size_t{kEvents});
  for (size_t i = 0; i < kEvents; ++i) {
    EXPECT_EQ(store::SeqAt(t, t.streams[0].records[i]), i);
    EXPECT_EQ(t.streams[0].records[i], starts[i + 1]);
  }
}

// A big trace is read through a mapping. Another program truncating the file meanwhile
// (a new `run -o` on the same path) must not kill the reader with SIGBUS: the pages past
// the new end read as zeros, and the file's problem says it was cut short.
struct Mapped {
  std::shared_ptr<const store::TraceBytes> bytes;
  int fd = -1;
  size_t size = 0;
};
Mapped MapSample(const std::string& dir, int events) {
  Mapped m;
  const std::string path = WriteSample(dir, events);
  m.fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  m.size = static_cast<size_t>(lseek(m.fd, 0, SEEK_END));
  void* map = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, m.fd, 0);
  EXPECT_NE(map, MAP_FAILED);
  m.bytes = std::make_shared<const store::TraceBytes>(static_cast<const uint8_t*>(map), m.size);
  return m;
}

TEST(TraceFile, AMappedTraceCutWhileIndexedSaysSo) {
  Mapped m = MapSample(testing::ScratchDir("trace_cut_index"), 20000);
  ASSERT_EQ(ftruncate(m.fd, static_cast<off_t>(m.size / 2)), 0);
  const auto t = store::ParseTraceBytes("t.ldscope", m.bytes, true);
  close(m.fd);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.problem->message, "cut short while it was read (another program truncated or rewrote the file)");
  EXPECT_LE(t.problem->offset, m.size / 2);
  EXPECT_GT(t.problem->offset, m.size / 2 - 8192);  // at most a page and a record before
  ASSERT_EQ(t.streams.size(), 1u);
  EXPECT_GT(t.streams[0].records.size(), 9000u);
  for (size_t i = 0; i < t.streams[0].records.size(); ++i) EXPECT_LT(t.streams[0].records[i], t.problem->offset);
}

TEST(TraceFile, AMappedTraceCutWhileDecodedSaysSo) {
  Mapped m = MapSample(testing::ScratchDir("trace_cut_decode"), 20000);
  store::TraceSet set;
  set.files.push_back(store::ParseTraceBytes("t.ldscope", m.bytes, true));
  ASSERT_TRUE(set.files[0].ok());
  ASSERT_EQ(ftruncate(m.fd, static_cast<off_t>(m.size / 2)), 0);
  close(m.fd);
  const v1::Timeline t = model::BuildTimeline(set);
  ASSERT_EQ(t.problems_size(), 1);
  EXPECT_EQ(t.problems(0).message(), "cut short while it was read (another program truncated or rewrote "
                                     "the file); the events of it read from there on are wrong");
  EXPECT_LE(t.problems(0).offset(), m.size / 2 + 4096);
  EXPECT_GT(t.problems(0).offset(), m.size / 2 - 4096);
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
  auto record = testing::Delimited;
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

// Files read by `show` and `report` are indexed and their events decoded one at a time
// as the model reads them; the timeline is the one the decoded events give: names and
// directories interned per stream in seq order (out of file order here), streams 0 and
// 1 of a file taken as one, equal seqs, a fork child, the collector's notes, a damaged
// tail.
TEST(TraceFile, IndexedEventsGiveTheTimelineOfDecodedOnes) {
  auto record = testing::Delimited;
  v1::TraceHeader h;
  h.set_format_version(1);
  h.set_host("h");
  std::string file = record(h.SerializeAsString());
  auto add = [&](uint32_t stream, uint32_t pid, uint64_t seq, auto&& fill) {
    v1::Event e;
    e.set_pid(pid);
    e.set_tid(pid);
    e.set_seq(seq);
    e.set_offset_ns(100 * seq + 7);
    e.set_stream(stream);
    fill(e);
    file += record(e.SerializeAsString());
  };
  auto start = [](uint64_t image_start, v1::StartReason reason) {
    return [=](v1::Event& e) {
      auto* s = e.mutable_process_start();
      s->set_reason(reason);
      s->set_exe("/bin/x\x01");
      s->add_argv("x");
      s->set_image_start_ns(image_start);
      if (reason == v1::START_FORK) {
        s->set_parent_pid(10);
        s->set_parent_image_start_ns(1000);
        s->set_parent_seq_at_fork(6);
      }
    };
  };
  auto open = [](uint64_t id, const std::string& path) {
    return [=](v1::Event& e) {
      e.mutable_objopen()->set_id(id);
      e.mutable_objopen()->set_path(path);
      e.mutable_objopen()->add_needed("liby.so");
    };
  };
  auto search = [](const std::string& name, uint32_t flag, uint32_t dir_ref, const std::string& dir) {
    return [=](v1::Event& e) {
      auto* s = e.mutable_search();
      s->set_name(name);
      s->set_flag(flag);
      s->set_requester(1);
      s->set_dir_ref(dir_ref);
      s->set_dir(dir);
    };
  };
  auto close = [](uint64_t id) { return [=](v1::Event& e) { e.mutable_objclose()->set_id(id); }; };
  // Stream 1: pid 10, its events out of seq order, one seq twice; stream 0: the same
  // image's other connection (LoadTraces numbers both alike).
  add(1, 10, 0, start(1000, v1::START_EXEC));
  add(1, 10, 1, [&](v1::Event& e) { open(1, "/bin/x")(e); e.mutable_objopen()->set_is_main(true); });
  add(1, 10, 3, search("", 0x40, 7, ""));                 // candidate before its ORIG
  add(1, 10, 2, search("liby.so", 0x01, 0, ""));          // ORIG
  add(1, 10, 4, search("", 0x40, 8, "/opt/b\n"));
  add(0, 10, 4, search("libz.so", 0x01, 0, ""));          // seq 4 again, stream 0
  add(1, 10, 5, open(2, "/opt/b\n/liby.so"));
  add(1, 10, 9, close(2));                                // a gap: 6..8 lost
  add(1, 10, 7, [](v1::Event& e) { e.mutable_activity()->set_kind(v1::ACTIVITY_CONSISTENT); });
  add(0, 10, 10, [](v1::Event& e) { e.mutable_exit(); });
  // Stream 2: a fork child of the first image.
  add(2, 11, 0, start(2000, v1::START_FORK));
  add(2, 11, 1, search("libq.so", 0x01, 0, ""));
  add(2, 11, 2, search("", 0x40, 1, "/opt/q"));
  add(2, 11, 3, close(1));
  // The collector's notes, on stream 0 of its own pid.
  add(0, 99, 0, [](v1::Event& e) {
    auto* n = e.mutable_collector();
    n->set_held_by_children(1);
    auto* u = n->add_untraced_after();
    u->mutable_image()->set_pid(11);
    u->mutable_image()->set_image_start_ns(2000);
    u->set_exe_after("/bin/y\x02");
  });
  const std::string whole = file;
  file += "\x05\x01";  // a damaged tail

  const auto dir = testing::ScratchDir("trace_indexed");
  const std::string path = dir + "/t.ldscope";
  testing::WriteFile(path, file);
  const v1::Timeline decoded = model::BuildTimeline(store::LoadTraces({path}));
  store::TraceSet set = store::LoadTracesIndexed({path});
  ASSERT_EQ(set.files.size(), 1u);
  EXPECT_TRUE(set.files[0].events.empty());
  EXPECT_EQ(store::EventCount(set.files[0]), 15u);
  const v1::Timeline indexed = model::BuildTimeline(set);
  ASSERT_EQ(indexed.processes_size(), 2);
  EXPECT_EQ(indexed.problems_size(), 1);
  EXPECT_EQ(indexed.processes(1).exe_after(), "/bin/y\x02");  // the bytes
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(indexed, decoded))
      << indexed.DebugString() << "\n---\n" << decoded.DebugString();
  EXPECT_EQ(store::TraceFilesByStream(set), store::TraceFilesByStream(store::LoadTraces({path})));
  // The same from memory.
  store::TraceSet a, b;
  a.files.push_back(store::ParseTrace("m", reinterpret_cast<const uint8_t*>(whole.data()), whole.size()));
  b.files.push_back(store::ParseTrace("m", reinterpret_cast<const uint8_t*>(whole.data()), whole.size(), true));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(model::BuildTimeline(a), model::BuildTimeline(b)));
  store::DropEvents(&set);
  EXPECT_EQ(store::EventCount(set.files[0]), 0u);
  EXPECT_FALSE(set.files[0].ok());
}

// A stream's records are kept as offsets, about 2 bytes each where they lie close
// together (records of one process), 4 within a 4 GiB segment of the file, 8 for a chunk
// of them across a segment boundary, and come back as they were given.
TEST(TraceFile, TheIndexKeepsAboutTwoBytesARecordAndGivesEveryOffsetBack) {
  store::RecordIndex small;
  std::vector<uint64_t> given;
  for (uint64_t i = 0; i < 100000; ++i) given.push_back(40 * i + (i % 7));
  for (uint64_t at : given) small.push_back(at);
  small.shrink_to_fit();
  ASSERT_EQ(small.size(), given.size());
  for (size_t i = 0; i < given.size(); ++i) ASSERT_EQ(small[i], given[i]) << i;
  EXPECT_LE(small.bytes(), 2 * given.size() + given.size() / 8 + 1024);
  // Chunks of 65,536: the first across the 12 GiB boundary of the file (8 bytes a
  // record), the second in one segment (4), the third dense (2), the last out of order
  // and in two segments (8).
  store::RecordIndex big;
  given.clear();
  const uint64_t from = (uint64_t{3} << 32) - 30000 * 2000;
  for (uint64_t i = 0; i < 2 * 65536; ++i) given.push_back(from + i * 2000);
  for (uint64_t i = 0; i < 65536; ++i) given.push_back(from + 2 * 65536 * 2000 + i * 40);
  for (uint64_t i = 0; i < 1000; ++i) given.push_back((uint64_t{5} << 32) + 1000 - i - (i % 2) * (uint64_t{3} << 32));
  for (uint64_t at : given) big.push_back(at);
  big.shrink_to_fit();
  ASSERT_EQ(big.size(), given.size());
  for (size_t i = 0; i < given.size(); ++i) ASSERT_EQ(big[i], given[i]) << i;
  EXPECT_EQ(big.front(), from);
  const size_t expected = 8 * 65536 + 4 * 65536 + (2 * 65536 + 8 * 1024) + 8 * 1000;
  EXPECT_GE(big.bytes(), expected);
  EXPECT_LE(big.bytes(), expected + 1024);
}

// A file's streams 0 and 1 are one image's (LoadTraces numbers both alike): the indexed
// reader merges them by seq, read back from each record as the decoder reads it (the last
// seq field of a record wins; a seq inside an unknown group or of another wire type is not
// the record's), each stream sorted by seq first (its records out of seq order in the
// file). The timeline is the one of the same events written plainly in seq order.
TEST(TraceFile, StreamsOfOneFileMergeBySeqsReadFromTheRecords) {
  auto record = testing::Delimited;
  v1::TraceHeader h;
  h.set_format_version(1);
  h.set_host("h");
  struct Ev {
    uint32_t stream;
    uint64_t seq;
    std::function<void(v1::Event&)> fill;
    std::string decoy;  // bytes appended after the event (with its seq set to decoy_seq)
    uint64_t decoy_seq = 0;
  };
  const auto start = [](v1::Event& e) {
    e.mutable_process_start()->set_reason(v1::START_EXEC);
    e.mutable_process_start()->set_exe("/bin/x");
    e.mutable_process_start()->set_image_start_ns(1000);
  };
  const auto open = [](uint64_t id, const std::string& path, bool main) {
    return [=](v1::Event& e) {
      e.mutable_objopen()->set_id(id);
      e.mutable_objopen()->set_path(path);
      e.mutable_objopen()->set_is_main(main);
    };
  };
  const auto search = [](const std::string& name, uint32_t flag, uint32_t dir_ref, const std::string& dir) {
    return [=](v1::Event& e) {
      e.mutable_search()->set_name(name);
      e.mutable_search()->set_flag(flag);
      e.mutable_search()->set_requester(1);
      e.mutable_search()->set_dir_ref(dir_ref);
      e.mutable_search()->set_dir(dir);
    };
  };
  const std::string seq_field = "\x18";                       // Event.seq, varint
  const std::string group = std::string("\xa3\x06\x18\x02\xa4\x06", 6);  // field 100 group {seq: 2}
  const std::string other_type = std::string("\x1a\x01\x09", 3);  // field 3, length-delimited
  // In file order: stream 1's candidate (seq 4) before its ORIG (seq 3), the streams
  // interleaved, seq 5 in both (file order decides).
  const std::vector<Ev> tricky = {
      {1, 0, start, group, 0},
      {0, 1, open(1, "/bin/x", true), other_type, 0},
      {1, 4, search("", 0x40, 7, "/opt/a"), seq_field + "\x04", 40},
      {0, 2, search("libz.so", 0x01, 0, ""), "", 0},
      {1, 3, search("liby.so", 0x01, 0, ""), seq_field + "\x09" + seq_field + "\x03", 1},
      {1, 5, open(2, "/opt/a/liby.so", false), group, 0},
      {0, 5, open(3, "/lib/libz.so", false), "", 0},
      {1, 7, [](v1::Event& e) { e.mutable_exit(); }, "", 0},
      {0, 6, [](v1::Event& e) { e.mutable_activity()->set_kind(v1::ACTIVITY_CONSISTENT); }, other_type, 0},
  };
  auto write = [&](const std::vector<Ev>& evs, bool plain) {
    std::string file = record(h.SerializeAsString());
    for (const Ev& ev : evs) {
      v1::Event e;
      e.set_pid(10);
      e.set_tid(10);
      e.set_seq(plain || ev.decoy_seq == 0 ? ev.seq : ev.decoy_seq);
      e.set_offset_ns(100 * ev.seq);
      e.set_stream(ev.stream);
      ev.fill(e);
      file += record(e.SerializeAsString() + (plain ? "" : ev.decoy));
    }
    return file;
  };
  std::vector<Ev> sorted = tricky;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Ev& a, const Ev& b) { return a.seq < b.seq; });
  const auto dir = testing::ScratchDir("trace_merge_seqs");
  testing::WriteFile(dir + "/tricky.ldscope", write(tricky, false));
  testing::WriteFile(dir + "/plain.ldscope", write(sorted, true));

  const store::TraceSet set = store::LoadTracesIndexed({dir + "/tricky.ldscope"});
  ASSERT_EQ(set.files.size(), 1u);
  ASSERT_TRUE(set.files[0].ok()) << set.files[0].problem->message;
  const store::TraceFile& f = set.files[0];
  ASSERT_EQ(f.streams.size(), 2u);
  std::vector<std::vector<uint64_t>> seqs;
  for (const auto& s : f.streams) {
    seqs.emplace_back();
    for (size_t i = 0; i < s.records.size(); ++i) seqs.back().push_back(store::SeqAt(f, s.records[i]));
  }
  EXPECT_EQ(seqs, (std::vector<std::vector<uint64_t>>{{1, 2, 5, 6}, {0, 3, 4, 5, 7}}));
  EXPECT_EQ(f.streams[1].starts, std::vector<uint32_t>{0});

  const v1::Timeline expected = model::BuildTimeline(store::LoadTraces({dir + "/plain.ldscope"}));
  ASSERT_EQ(expected.processes_size(), 1);
  const v1::Timeline indexed = model::BuildTimeline(set);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(indexed, expected))
      << indexed.DebugString() << "\n---\n" << expected.DebugString();
  const v1::Timeline decoded = model::BuildTimeline(store::LoadTraces({dir + "/tricky.ldscope"}));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(decoded, expected))
      << decoded.DebugString() << "\n---\n" << expected.DebugString();
}

// Every byte string of every event (the schema's `bytes` fields), and the header's host,
// come out of the reader as the bytes the file holds, whatever body they are in.
TEST(TraceFile, EveryByteStringOfEveryEventReadsAsWritten) {
  // A search's dir and base are joined into its candidate, then cleared; the facts
  // records are kept apart (TraceFile::facts).
  const std::set<std::string> keep = {"ldscope.v1.Search.dir", "ldscope.v1.Search.base",
                                      "ldscope.v1.Event.object_facts"};
  const std::string raw = "a\xff\n\\\x01";
  v1::TraceHeader h;
  h.set_format_version(1);
  h.set_host(raw);
  std::string file = testing::Delimited(h.SerializeAsString());
  std::vector<std::vector<std::string>> filled;
  const auto* body = v1::Event::descriptor()->FindOneofByName("body");
  for (int i = 0; i < body->field_count(); ++i) {
    if (keep.count(body->field(i)->full_name()) != 0) continue;
    v1::Event e;
    e.set_pid(10);
    e.set_seq(static_cast<uint64_t>(i));
    filled.emplace_back();
    testing::FillBytes(e.GetReflection()->MutableMessage(&e, body->field(i)), raw, keep, &filled.back());
    file += testing::Delimited(e.SerializeAsString());
  }
  for (const bool indexed : {false, true}) {
    const auto t = store::ParseTrace("x", reinterpret_cast<const uint8_t*>(file.data()), file.size(), indexed);
    ASSERT_TRUE(t.ok()) << t.problem->message;
    EXPECT_EQ(t.header.host(), raw);
    std::vector<v1::Event> events = t.events;
    const store::EventStream none;
    for (const auto& c : t.collector) events.push_back(store::DecodeAlone(t, none, c.first));
    for (const auto& s : t.streams)
      for (size_t k = 0; k < s.records.size(); ++k) events.push_back(store::DecodeAlone(t, s, s.records[k]));
    std::sort(events.begin(), events.end(), [](const v1::Event& a, const v1::Event& b) { return a.seq() < b.seq(); });
    ASSERT_EQ(events.size(), filled.size()) << (indexed ? "indexed" : "decoded");
    size_t checked = 0;
    for (size_t i = 0; i < filled.size(); ++i)
      for (const auto& name : filled[i]) {
        EXPECT_EQ(testing::BytesOf(events[i], name), raw) << name;
        ++checked;
      }
    EXPECT_GE(checked, 25u);  // the schema's byte strings, not a few of them
  }
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
