// The collector's datagram format: one Event, or a batch (EventBatch, field 1 repeated)
// of them, as the audit library sends the events of one loader transaction. Split
// exactly, refused whole when malformed, and stored event by event by the server.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ipc/server.h"
#include "store/trace_file.h"
#include "support/test_support.h"
#include "wire.h"

namespace ldscope {
namespace {

std::string EventBytes(uint32_t pid, uint64_t seq, const std::string& name) {
  v1::Event e;
  e.set_pid(pid);
  e.set_seq(seq);
  if (seq == 0) {
    e.mutable_process_start()->set_exe("/bin/x");
    e.mutable_process_start()->set_image_start_ns(77);
  } else {
    e.mutable_search()->set_name(name);
  }
  return e.SerializeAsString();
}

// The batch encoding, written by hand (as the audit library writes it).
std::string Batch(const std::vector<std::string>& events) {
  std::string out;
  for (const auto& e : events) {
    uint8_t head[12];
    head[0] = 0x0a;
    const size_t n = static_cast<size_t>(wire::PutVarint(head + 1, e.size()) - head);
    out.append(reinterpret_cast<const char*>(head), n);
    out += e;
  }
  return out;
}

std::vector<std::string> Split(const std::string& datagram, bool* ok) {
  std::vector<ipc::FrameSlice> slices;
  *ok = ipc::SplitFrame(reinterpret_cast<const uint8_t*>(datagram.data()), datagram.size(), &slices);
  std::vector<std::string> out;
  for (const auto& s : slices) out.emplace_back(reinterpret_cast<const char*>(s.data), s.size);
  return out;
}

TEST(Frame, OneEventDatagramIsOneSlice) {
  const std::string e = EventBytes(10, 3, "libx.so");
  bool ok = false;
  const auto parts = Split(e, &ok);
  ASSERT_TRUE(ok);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0], e);
  v1::Event parsed;
  EXPECT_TRUE(ipc::ParseFrame(reinterpret_cast<const uint8_t*>(parts[0].data()), parts[0].size(), &parsed));
  EXPECT_EQ(parsed.search().name(), "libx.so");
}

TEST(Frame, BatchSplitsIntoItsEventsInOrder) {
  std::vector<std::string> events;
  for (int i = 1; i <= 300; ++i)  // lengths past 127: two-byte length varints
    events.push_back(EventBytes(10, static_cast<uint64_t>(i), std::string(static_cast<size_t>(i), 'n')));
  const std::string batch = Batch(events);
  bool ok = false;
  const auto parts = Split(batch, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(parts, events);
  // It is also the protobuf encoding of `EventBatch { repeated Event event = 1; }`: a
  // generic reader sees a field-1 entry per event (here: parsed as an Event it has no
  // pid, so it can never be mistaken for one event).
  v1::Event as_one;
  EXPECT_FALSE(ipc::ParseFrame(reinterpret_cast<const uint8_t*>(batch.data()), batch.size(), &as_one));
}

TEST(Frame, MalformedBatchesAreRefusedWhole) {
  const std::string good = Batch({EventBytes(10, 1, "a"), EventBytes(10, 2, "b")});
  bool ok = true;
  Split(good.substr(0, good.size() - 1), &ok);  // last entry runs past the end
  EXPECT_FALSE(ok);
  Split(good + "\x08\x01", &ok);  // trailing field that is not an entry
  EXPECT_FALSE(ok);
  Split(good + "\x0a", &ok);  // an entry tag without its length
  EXPECT_FALSE(ok);
  Split(std::string("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11), &ok);  // varint overflow
  EXPECT_FALSE(ok);
  Split(std::string("\x0a\x80\x80\x80\x80\x10", 6), &ok);  // a length far past the end
  EXPECT_FALSE(ok);
  Split(std::string(ipc::kMaxDatagram + 1, '\x08'), &ok);
  EXPECT_FALSE(ok);
  Split(Batch({std::string(ipc::kMaxDatagram, 'x')}), &ok);  // too big as a whole
  EXPECT_FALSE(ok);
  // An empty entry splits (the event check refuses it: no pid).
  const auto parts = Split(std::string("\x0a\x00", 2), &ok);
  ASSERT_TRUE(ok);
  ASSERT_EQ(parts.size(), 1u);
  v1::Event e;
  EXPECT_FALSE(ipc::ParseFrame(reinterpret_cast<const uint8_t*>(parts[0].data()), parts[0].size(), &e));
}

// Through a real socket: a batch datagram's events are stored one by one, with the
// connection's stream, exactly as if each had come alone; a batch holding a bad event
// disconnects its sender.
TEST(Frame, ServerStoresEachEventOfABatch) {
  const auto dir = testing::ScratchDir("frame_server");
  const std::string trace = dir + "/t.ldscope";
  const ipc::ServerStats stats = testing::ServeGoodAndBad(
      dir,
      {EventBytes(10, 0, ""),                                                  // alone
       Batch({EventBytes(10, 1, "libone.so"), EventBytes(10, 2, "libtwo.so")}),
       EventBytes(10, 3, "libthree.so"),                                      // alone again
       Batch({EventBytes(10, 4, "libfour.so")})},                             // a batch of one
      {EventBytes(11, 0, ""), Batch({EventBytes(11, 1, "libok.so"), EventBytes(0, 2, "no-pid")}),
       EventBytes(11, 3, "after.so")});
  EXPECT_EQ(stats.bad_clients, 1u);
  EXPECT_EQ(stats.events, 5u + 2u) << "good: 5; bad: its start and libok.so";
  const auto t = store::ReadTraceFile(trace);
  ASSERT_TRUE(t.ok()) << t.problem->message;
  std::vector<std::string> names;
  for (const auto& e : t.events) {
    if (e.pid() != 10) continue;
    EXPECT_EQ(e.stream(), 1u);
    if (e.has_search()) names.push_back(e.search().name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"libone.so", "libtwo.so", "libthree.so", "libfour.so"}));
}

}  // namespace
}  // namespace ldscope
