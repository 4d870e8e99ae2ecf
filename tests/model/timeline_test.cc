// The timeline model handed over in parts (model::BuildTimeline with ProcessParts, what
// `show` prints from): an entry is handed over only once no later event can change it,
// and the parts make exactly the text of the whole timeline.
#include <link.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "analysis/context.h"
#include "render/render.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"
#include "text/escape.h"
#include "support/context_dump.h"
#include "support/sequence.h"
#include "support/test_support.h"

#include <google/protobuf/util/message_differencer.h>

namespace ldscope {
namespace {

// The events of one process image, numbered in order.
class Events {
 public:
  Events() {
    v1::Event& e = Next();
    e.mutable_process_start()->set_image_start_ns(1000);
    e.mutable_process_start()->set_exe("/bin/prog");
  }
  // A fork child (pid, stream) of the image above, forked before its event at_seq.
  Events(uint32_t pid, uint32_t stream, uint64_t at_seq) : pid_(pid), stream_(stream) {
    auto* s = Next().mutable_process_start();
    s->set_reason(v1::START_FORK);
    s->set_image_start_ns(1000 + at_seq);
    s->set_exe("/bin/prog");
    s->set_parent_pid(7);
    s->set_parent_image_start_ns(1000);
    s->set_parent_seq_at_fork(at_seq);
  }
  uint64_t seq() const { return events_.size(); }
  const std::vector<v1::Event>& events() const { return events_; }
  void Open(uint64_t id, const std::string& path, std::vector<std::string> needed = {}) {
    auto* o = Next().mutable_objopen();
    o->set_id(id);
    o->set_path(path);
    o->set_soname(path.substr(path.rfind('/') + 1));
    o->set_is_main(id == 1);
    for (auto& n : needed) o->add_needed(n);
  }
  void Search(uint64_t requester, const std::string& name, const std::string& candidate) {
    auto* s = Next().mutable_search();
    s->set_requester(requester);
    s->set_name(name);
    s->set_flag(LA_SER_ORIG);
    s = Next().mutable_search();
    s->set_requester(requester);
    s->set_candidate(candidate);
    s->set_flag(LA_SER_RUNPATH);
  }
  void Activity(v1::ActivityKind k) { Next().mutable_activity()->set_kind(k); }
  void Close(uint64_t id, bool unrelocated) {
    auto* c = Next().mutable_objclose();
    c->set_id(id);
    c->set_unrelocated(unrelocated);
  }
  void Exit() { Next().mutable_exit(); }
  // The executable and start-up's batch.
  void Start() {
    Open(1, "/bin/prog");
    Activity(v1::ACTIVITY_ADD);
    Activity(v1::ACTIVITY_CONSISTENT);
  }
  // A dlopen by the executable that maps path as id (its batch still open).
  void Dlopen(const std::string& name, uint64_t id, const std::string& path, std::vector<std::string> needed = {}) {
    Search(1, name, path);
    Activity(v1::ACTIVITY_ADD);
    Open(id, path, std::move(needed));
  }
  // A dlclose (or a failed dlopen's rollback) of id.
  void Dlclose(uint64_t id, bool unrelocated = false) {
    Activity(v1::ACTIVITY_DELETE);
    Close(id, unrelocated);
    Activity(v1::ACTIVITY_CONSISTENT);
  }
  // The events as a trace file's bytes.
  std::string File() const {
    v1::TraceHeader h;
    h.set_format_version(1);
    std::string out = testing::Delimited(h.SerializeAsString());
    for (const auto& e : events_) out += testing::Delimited(e.SerializeAsString());
    return out;
  }
  store::TraceSet Set() const {
    store::TraceSet set;
    set.files.emplace_back();
    set.files.back().path = "t.ldscope";
    set.files.back().events = events_;
    return set;
  }

 private:
  v1::Event& Next() {
    v1::Event& e = events_.emplace_back();
    e.set_pid(pid_);
    e.set_stream(stream_);
    e.set_seq(events_.size() - 1);
    e.set_mono_ns(1000 + events_.size());
    return e;
  }
  uint32_t pid_ = 7, stream_ = 1;
  std::vector<v1::Event> events_;
};

// Three dlopens: libx.so, then libz.so (which needs libx.so: reused), then liby.so,
// which fails and is rolled back together with libx.so's close in the same group (an
// object of an earlier batch: relocated, not this rollback's), then libw.so.
Events ThreeDlopens() {
  Events ev;
  ev.Open(1, "/bin/prog");
  ev.Activity(v1::ACTIVITY_ADD);
  ev.Activity(v1::ACTIVITY_CONSISTENT);
  for (const char* lib : {"libx.so", "libz.so", "liby.so", "libw.so"}) {
    const std::string name = lib;
    const uint64_t id = name == "libx.so" ? 2 : name == "libz.so" ? 3 : name == "liby.so" ? 4 : 5;
    ev.Search(1, name, "/opt/" + name);
    ev.Activity(v1::ACTIVITY_ADD);
    ev.Open(id, "/opt/" + name, name == "libz.so" ? std::vector<std::string>{"libx.so"}
                                                  : std::vector<std::string>{});
    if (name == "liby.so") {
      ev.Activity(v1::ACTIVITY_DELETE);
      ev.Close(4, true);
      ev.Close(2, false);
    }
    ev.Activity(v1::ACTIVITY_CONSISTENT);
  }
  ev.Exit();
  return ev;
}

TEST(Timeline, PartsHandOverOnlyFinalEntriesAndMakeTheWholeText) {
  const store::TraceSet set = ThreeDlopens().Set();
  const v1::Timeline whole = model::BuildTimeline(set);
  ASSERT_EQ(whole.processes_size(), 1);
  const v1::ProcessTimeline& p = whole.processes(0);
  // The failed dlopen rolled back liby.so (its batch's) and listed libx.so, whose load
  // (an earlier batch) stays as it was.
  std::vector<std::string> loads;
  for (const auto& e : p.entries())
    if (e.has_load())
      loads.push_back(e.load().object().path() + (e.load().rolled_back() ? " rolled back" : ""));
  EXPECT_EQ(loads, (std::vector<std::string>{"/bin/prog", "/opt/libx.so", "/opt/libz.so",
                                             "/opt/liby.so rolled back", "/opt/libw.so"}));
  // libz.so's NEEDED libx.so was reused: set by the end of libz.so's batch.
  ASSERT_EQ(p.entries(2).load().reused_size(), 1);

  render::TextOptions opt;
  opt.timestamps = false;
  opt.verbose = true;
  std::string streamed;
  auto sink = [&](const std::string& piece) {
    streamed += piece;
    return true;
  };
  render::ProcessTextWriter w(opt, sink);
  std::vector<int> handed;  // entries per part
  v1::Timeline rest;
  model::BuildTimeline(set, &rest, [&](const v1::ProcessTimeline& part, bool complete) {
    handed.push_back(part.entries_size());
    EXPECT_EQ(part.objects_size(), 0);  // no object table when handed over in parts
    return complete ? w.Complete(part) : w.Part(part);
  });
  // Each ADD hands over what came before it: the start-up batch (prog), libx.so, libz.so
  // (its reuse set at its CONSISTENT), liby.so with the failed dlopen's entry; then the
  // rest, libw.so.
  EXPECT_EQ(handed, (std::vector<int>{1, 1, 1, 2, 1}));
  EXPECT_EQ(streamed, render::TimelineText(whole, opt).substr(0, streamed.size()));
  render::TimelineTailText(rest, opt, sink);
  EXPECT_EQ(streamed, render::TimelineText(whole, opt));
}

// A process of many events (a churn of dlopens) is decoded on a thread of its own, ahead
// of the builder: the timeline is the one of its events decoded up front.
TEST(Timeline, ALongProcessDecodedAheadGivesTheSameTimeline) {
  Events ev;
  ev.Open(1, "/bin/prog");
  ev.Activity(v1::ACTIVITY_ADD);
  ev.Activity(v1::ACTIVITY_CONSISTENT);
  for (uint64_t id = 2; id < 20000; ++id) {  // 8 events a round: 160,000 events
    ev.Search(1, "libx.so", "/opt/libx.so");
    ev.Activity(v1::ACTIVITY_ADD);
    ev.Open(id, "/opt/libx.so");
    ev.Activity(v1::ACTIVITY_CONSISTENT);
    ev.Activity(v1::ACTIVITY_DELETE);
    ev.Close(id, id % 1000 == 0);
    ev.Activity(v1::ACTIVITY_CONSISTENT);
  }
  ev.Exit();
  const std::string file = ev.File();
  store::TraceSet indexed;
  indexed.files.push_back(
      store::ParseTrace("t.ldscope", reinterpret_cast<const uint8_t*>(file.data()), file.size(), true));
  ASSERT_TRUE(indexed.files[0].ok());
  ASSERT_GT(store::EventCount(indexed.files[0]), 150000u);
  store::TraceSet decoded;
  decoded.files.push_back(store::ParseTrace("t.ldscope", reinterpret_cast<const uint8_t*>(file.data()), file.size()));
  const v1::Timeline a = model::BuildTimeline(indexed);
  const v1::Timeline b = model::BuildTimeline(decoded);
  ASSERT_EQ(a.processes_size(), 1);
  EXPECT_EQ(a.processes(0).events(), store::EventCount(indexed.files[0]));
  EXPECT_EQ(a.processes(0).missing_seqs(), 0u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b));
}

// A receiver that says stop (show's output failed) gets nothing more: the rest of the
// process and the processes after it are not built.
TEST(Timeline, PartsStopWhenTheReceiverSaysSo) {
  const std::string file = ThreeDlopens().File();
  store::TraceSet set;
  set.files.push_back(store::ParseTrace("t.ldscope", reinterpret_cast<const uint8_t*>(file.data()), file.size(), true));
  int calls = 0;
  v1::Timeline rest;
  model::BuildTimeline(set, &rest, [&](const v1::ProcessTimeline&, bool) {
    ++calls;
    return false;
  });
  EXPECT_EQ(calls, 1);
  int all = 0;
  model::BuildTimeline(set, &rest, [&](const v1::ProcessTimeline&, bool) {
    ++all;
    return true;
  });
  EXPECT_GT(all, 2);
}

// The object table's rows handed over with the parts (`report`): each once it is final,
// the table's last row of each id being the whole timeline's row; and the analysis
// context made of the parts is the one made of the whole timeline.
void ExpectPartsMakeTheWholeTable(const store::TraceSet& set) {
  const v1::Timeline whole = model::BuildTimeline(set);
  v1::Timeline rest;
  std::vector<std::map<uint64_t, std::string>> tables(1);
  model::BuildTimeline(
      set, &rest,
      [&](const v1::ProcessTimeline& part, bool complete) {
        for (const auto& lo : part.objects()) tables.back()[lo.object().id()] = lo.ShortDebugString();
        if (complete) tables.emplace_back();
        return true;
      },
      /*with_objects=*/true);
  tables.pop_back();
  ASSERT_EQ(static_cast<int>(tables.size()), whole.processes_size());
  for (int i = 0; i < whole.processes_size(); ++i) {
    std::map<uint64_t, std::string> want;
    for (const auto& lo : whole.processes(i).objects()) want[lo.object().id()] = lo.ShortDebugString();
    EXPECT_EQ(tables[static_cast<size_t>(i)], want) << "process " << i;
  }
  const analysis::Context of_whole(whole);
  v1::Timeline streamed;
  analysis::Context of_parts(&streamed);
  model::BuildTimeline(
      set, &streamed,
      [&](const v1::ProcessTimeline& part, bool complete) { return of_parts.AddPart(part, complete); },
      /*with_objects=*/true);
  EXPECT_EQ(testing::ContextDump(of_parts), testing::ContextDump(of_whole));
  EXPECT_EQ(streamed.processes_size(), whole.processes_size());
}

TEST(Timeline, RowsInPartsMakeTheWholeTable) {
  // Rolled back, reused, relocated in an earlier batch.
  ExpectPartsMakeTheWholeTable(ThreeDlopens().Set());
  // A churn whose objects end as the next batch begins, below objects that live on.
  Events churn;
  churn.Open(1, "/bin/prog", {"libc.so"});
  churn.Search(1, "libc.so", "/lib/libc.so");
  churn.Open(2, "/lib/libc.so");
  churn.Activity(v1::ACTIVITY_ADD);
  churn.Activity(v1::ACTIVITY_CONSISTENT);
  for (uint64_t id = 3; id < 40; ++id) {
    churn.Dlopen("libx.so", id, "/opt/libx.so", {"libc.so"});
    churn.Activity(v1::ACTIVITY_CONSISTENT);
    if (id % 5 != 0) churn.Dlclose(id, id % 7 == 0);  // every fifth stays loaded
  }
  churn.Exit();
  ExpectPartsMakeTheWholeTable(churn.Set());
}

// An object that was unloaded is gone: a later event that names its id (only a damaged
// trace has one, or ids reused after lost events) reaches no object. A reference names
// the id alone, the requester's NEEDED list does not make a load NEEDED, and a second
// close of the id is a row of its own (known only from that close), in the whole
// timeline as in the parts `report` reads (which forget ended objects).
TEST(Timeline, AnObjectThatEndedIsGone) {
  Events ev;
  ev.Start();
  ev.Dlopen("liba.so", 2, "/opt/liba.so", {"libb.so"});
  ev.Activity(v1::ACTIVITY_CONSISTENT);
  ev.Dlclose(2);
  ev.Search(2, "libb.so", "/opt/libb.so");  // requested by the object that ended
  ev.Activity(v1::ACTIVITY_ADD);
  ev.Open(3, "/opt/libb.so");
  ev.Activity(v1::ACTIVITY_CONSISTENT);
  ev.Dlclose(2);  // closed again
  ev.Exit();
  const v1::Timeline t = model::BuildTimeline(ev.Set());
  ASSERT_EQ(t.processes_size(), 1);
  const v1::ProcessTimeline& p = t.processes(0);
  const v1::Load* b = nullptr;
  for (const auto& e : p.entries())
    if (e.has_load() && e.load().object().id() == 3) b = &e.load();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->requester().ShortDebugString(), "id: 2");
  EXPECT_EQ(b->reason(), v1::LOAD_DLOPEN);
  std::vector<std::string> rows;
  for (const auto& lo : p.objects()) rows.push_back(lo.ShortDebugString());
  EXPECT_EQ(rows, (std::vector<std::string>{
                      "object { id: 1 path: \"/bin/prog\" soname: \"prog\" } load_entry: 1 open_seq: 1",
                      "object { id: 2 } close_seq: 18",
                      "object { id: 3 path: \"/opt/libb.so\" soname: \"libb.so\" } load_entry: 4 open_seq: 12 "
                      "requester: 2 found_by: STEP_RPATH"}));
  ExpectPartsMakeTheWholeTable(ev.Set());
}

// An id opened again after its object ended (lost events, or a damaged trace) is a new
// object: the searches the old one made are not its own, so its NEEDED names that no
// search followed were matched against objects already loaded (reused).
TEST(Timeline, AnIdOpenedAgainIsANewObject) {
  Events ev;
  ev.Start();
  ev.Dlopen("liba.so", 2, "/opt/liba.so", {"libc.so"});
  ev.Search(2, "libc.so", "/lib/libc.so");
  ev.Open(3, "/lib/libc.so");
  ev.Activity(v1::ACTIVITY_CONSISTENT);
  ev.Dlclose(2);
  ev.Dlopen("liba.so", 2, "/opt/liba.so", {"libc.so"});  // libc.so is loaded: no search
  ev.Activity(v1::ACTIVITY_CONSISTENT);
  ev.Exit();
  const v1::Timeline t = model::BuildTimeline(ev.Set());
  ASSERT_EQ(t.processes_size(), 1);
  std::vector<std::string> reused;
  for (const auto& e : t.processes(0).entries())
    if (e.has_load() && e.load().object().id() == 2)
      reused.push_back(e.load().reused_size() == 0 ? "none" : e.load().reused(0).ShortDebugString());
  EXPECT_EQ(reused, (std::vector<std::string>{
                        "none", "name: \"libc.so\" object { id: 3 path: \"/lib/libc.so\" soname: \"libc.so\" } "
                                "matched_by: \"requested name\" loaded_earlier: true"}));
  ExpectPartsMakeTheWholeTable(ev.Set());
}

// Fork children share the objects they inherit: one table per point of fork of the
// parent (Timeline.inherited), which each child names; a child's own rows are its own
// objects and the inherited ones it changed (closed, or whose id a new object took). The
// reuse of an inherited object by name, the end count, the parts `report` reads and the
// context's view of each child's table are those of a child holding copies.
TEST(Timeline, ForkChildrenShareWhatTheyInherit) {
  Events parent;
  parent.Start();
  parent.Dlopen("liba.so", 2, "/opt/liba.so");
  parent.Activity(v1::ACTIVITY_CONSISTENT);
  parent.Dlopen("libb.so", 3, "/opt/libb.so");
  parent.Activity(v1::ACTIVITY_CONSISTENT);
  const uint64_t first_fork = parent.seq();
  parent.Dlclose(2);
  const uint64_t second_fork = parent.seq();
  parent.Exit();
  // Forked with liba and libb: one closes libb, maps libc under its id, and dlopens libd,
  // which needs liba (inherited: no search); one does nothing. A third is forked later.
  Events busy(8, 2, first_fork), idle(9, 3, first_fork), late(10, 4, second_fork);
  busy.Dlclose(3);
  busy.Dlopen("libc.so", 3, "/opt/libc.so");
  busy.Activity(v1::ACTIVITY_CONSISTENT);
  busy.Dlopen("libd.so", 4, "/opt/libd.so", {"liba.so"});
  busy.Activity(v1::ACTIVITY_CONSISTENT);
  for (Events* e : {&busy, &idle, &late}) e->Exit();
  store::TraceSet set = parent.Set();
  for (const Events* e : {&busy, &idle, &late})
    set.files.back().events.insert(set.files.back().events.end(), e->events().begin(), e->events().end());
  const v1::Timeline t = model::BuildTimeline(set);
  ASSERT_EQ(t.processes_size(), 4);
  ASSERT_EQ(t.inherited_size(), 2);
  auto ids = [](const auto& rows) {
    std::vector<std::string> out;
    for (const auto& lo : rows) out.push_back(fmt::format("{} {}", lo.object().id(), lo.object().path()));
    return out;
  };
  EXPECT_EQ(ids(t.inherited(0).objects()),
            (std::vector<std::string>{"1 /bin/prog", "2 /opt/liba.so", "3 /opt/libb.so"}));
  EXPECT_EQ(ids(t.inherited(1).objects()), (std::vector<std::string>{"1 /bin/prog", "3 /opt/libb.so"}));
  const v1::ProcessTimeline &b = t.processes(1), &i = t.processes(2), &l = t.processes(3);
  EXPECT_EQ(b.inherited_objects(), 1u);
  EXPECT_EQ(i.inherited_objects(), 1u);
  EXPECT_EQ(l.inherited_objects(), 2u);
  EXPECT_EQ(ids(b.objects()), (std::vector<std::string>{"3 /opt/libc.so", "4 /opt/libd.so"}));
  EXPECT_EQ(ids(i.objects()), std::vector<std::string>{});
  EXPECT_EQ(b.inherited_open_at_end(), 2u);  // the executable and liba
  std::vector<std::string> at_end;
  for (const auto& r : b.loaded_at_end()) at_end.push_back(fmt::format("{} {}", r.id(), r.path()));
  EXPECT_EQ(at_end, (std::vector<std::string>{"3 /opt/libc.so", "4 /opt/libd.so"}));
  EXPECT_EQ(i.inherited_open_at_end(), 3u);
  std::vector<std::string> reused;
  for (const auto& e : b.entries())
    if (e.has_load() && e.load().object().id() == 4)
      for (const auto& r : e.load().reused()) reused.push_back(r.ShortDebugString());
  EXPECT_EQ(reused, std::vector<std::string>{"name: \"liba.so\" object { id: 2 path: \"/opt/liba.so\" soname: "
                                             "\"liba.so\" } matched_by: \"requested name\" loaded_earlier: true"});
  // The context reads each child's table whole, in id order.
  const analysis::Context ctx(t);
  auto table = [&](int p) {
    std::vector<std::string> out;
    for (const auto& [id, o] : ctx.processes()[static_cast<size_t>(p)].objects)
      out.push_back(fmt::format("{} {}{}", id, o.path.str(), o.load == nullptr ? " inherited" : ""));
    return out;
  };
  EXPECT_EQ(table(1), (std::vector<std::string>{"1 /bin/prog inherited", "2 /opt/liba.so inherited", "3 /opt/libc.so",
                                                "4 /opt/libd.so"}));
  EXPECT_EQ(table(2), (std::vector<std::string>{"1 /bin/prog inherited", "2 /opt/liba.so inherited",
                                                "3 /opt/libb.so inherited"}));
  EXPECT_EQ(table(3), (std::vector<std::string>{"1 /bin/prog inherited", "3 /opt/libb.so inherited"}));
  EXPECT_EQ(ctx.processes()[1].objects.size(), 4u);
  ExpectPartsMakeTheWholeTable(set);
}

// show's time column, written digit by digit, is what fmt's "+{:.3f}ms" right-aligned in
// 10 columns gives, ties at the third decimal and offsets of any size included.
TEST(Timeline, TimeColumnIsFmtsRounding) {
  std::vector<uint64_t> offsets = {0, 1, 499, 500, 501, 999, 1000, 1500, 2500, 999'499, 999'500,
                                   999'501, 1'000'500, 12'345'678, 999'999'999'999,
                                   999'999'999'999'999, 1'000'000'000'000'000,
                                   1'000'000'000'000'500, UINT64_MAX};
  uint64_t x = 88172645463325252ull;  // xorshift: offsets of every size
  for (int i = 0; i < 3000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    offsets.push_back(x >> (i % 64));
  }
  v1::Timeline t;
  v1::ProcessTimeline* p = t.add_processes();
  for (uint64_t ns : offsets) {
    v1::Entry* e = p->add_entries();
    e->set_offset_ns(ns);
    e->mutable_unload()->mutable_object()->set_path("/x");
  }
  render::TextOptions opt;
  const std::string text = render::TimelineText(t, opt);
  size_t at = 0;
  for (uint64_t ns : offsets) {
    const std::string want =
        fmt::format("{:>10} [ns 0] unload      /x\n", fmt::format("+{:.3f}ms", ns / 1e6));
    at = text.find("[ns 0] unload", at);
    ASSERT_NE(at, std::string::npos);
    const size_t line = text.rfind('\n', at) + 1;
    EXPECT_EQ(text.substr(line, text.find('\n', at) + 1 - line), want) << ns;
    ++at;
  }
}

// The full names of t's string fields (map entries' keys and values too) whose value
// holds text, and the raw bytes found in any of them.
void StringsHolding(const google::protobuf::Message& m, const std::string& text, std::set<std::string>* holding,
                    std::set<std::string>* raw) {
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int k = 0; k < r->FieldSize(m, f); ++k) StringsHolding(r->GetRepeatedMessage(m, f, k), text, holding, raw);
      } else if (r->HasField(m, f)) {
        StringsHolding(r->GetMessage(m, f), text, holding, raw);
      }
      continue;
    }
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_STRING) continue;
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int k = 0; k < n; ++k) {
      const std::string v = f->is_repeated() ? r->GetRepeatedString(m, f, k) : r->GetString(m, f);
      if (v.find(text) != std::string::npos) holding->insert(f->full_name());
      if (v.find_first_of(std::string("\xff\x01\n", 3)) != std::string::npos)
        raw->insert(f->full_name() + ": " + text::Escape(v));
    }
  }
}

// Every byte string of every event (events.proto's `bytes` fields) that the model keeps
// is the same bytes in the timeline, found from the schema: the events' byte strings are
// all invalid UTF-8 and control bytes, and no string of the timeline holds them escaped.
TEST(Timeline, EveryByteStringOfEveryEventIsKeptAsBytesInTheModel) {
  const std::string raw = "a\xff\n\\\x01";
  const std::string shown = text::Escape(raw);
  ASSERT_EQ(shown, "a\\xff\\n\\\\\\x01");
  // The model prints a build-id in hex; the reader joins a search's dir and base into its
  // candidate; the facts records are the analysis's (elf::FromFacts).
  const std::set<std::string> keep = {"ldscope.v1.ObjOpen.build_id", "ldscope.v1.Search.dir", "ldscope.v1.Search.base",
                                      "ldscope.v1.Event.object_facts", "ldscope.v1.Event.snapshot"};
  store::TraceSet set;
  set.files.emplace_back();
  set.files.back().path = "t.ldscope";
  std::map<uint32_t, uint64_t> seqs;
  std::vector<std::string> filled;
  const auto* body = v1::Event::descriptor()->FindOneofByName("body");
  for (int i = 0; i < body->field_count(); ++i) {
    const auto* f = body->field(i);
    if (keep.count(f->full_name()) != 0) continue;
    // The loader's stream 1, the Python hook's stream 2 (same pid), the collector's 0.
    const bool py = f->name().rfind("py_", 0) == 0;
    const bool collector = f->name() == "collector" || f->name() == "mount_facts" || f->name() == "owner_facts";
    v1::Event& e = set.files.back().events.emplace_back();
    e.set_stream(py ? 2 : collector ? 0 : 1);
    e.set_pid(collector ? 99 : 7);
    e.set_seq(seqs[e.stream()]++);
    e.set_mono_ns(2000 + set.files.back().events.size());
    auto* m = e.GetReflection()->MutableMessage(&e, f);
    testing::FillBytes(m, raw, keep, &filled);
    if (e.has_process_start()) e.mutable_process_start()->set_image_start_ns(1000);
    if (e.has_objopen()) e.mutable_objopen()->set_id(2);
    if (e.has_objclose()) e.mutable_objclose()->set_id(2);
    if (e.has_collector()) {
      auto* u = e.mutable_collector()->mutable_untraced_after(0)->mutable_image();
      u->set_pid(7);
      u->set_image_start_ns(1000);
    }
  }
  const v1::Timeline t = model::BuildTimeline(set);
  std::set<std::string> escaped, holding, raw_found;
  StringsHolding(t, shown, &escaped, &raw_found);
  EXPECT_EQ(escaped, std::set<std::string>{});
  StringsHolding(t, raw, &holding, &raw_found);
  // And they are there, as bytes: every model field that holds a byte string of these
  // events (a ctypes dlopen without a load and the hook's own modules are not kept).
  EXPECT_GE(filled.size(), 25u);
  const std::set<std::string> expected = {"ldscope.v1.Candidate.path",
                                          "ldscope.v1.Load.needed",
                                          "ldscope.v1.Load.requested_name",
                                          "ldscope.v1.Load.rpath",
                                          "ldscope.v1.Load.runpath",
                                          "ldscope.v1.Mount.dirs",
                                          "ldscope.v1.Mount.mount_point",
                                          "ldscope.v1.Mount.source",
                                          "ldscope.v1.ObjectRef.path",
                                          "ldscope.v1.ObjectRef.soname",
                                          "ldscope.v1.Owner.arch",
                                          "ldscope.v1.Owner.name",
                                          "ldscope.v1.Owner.paths",
                                          "ldscope.v1.Owner.record",
                                          "ldscope.v1.Owner.requires_dist",
                                          "ldscope.v1.Owner.root",
                                          "ldscope.v1.Owner.tags",
                                          "ldscope.v1.Owner.unknown",
                                          "ldscope.v1.Owner.version",
                                          "ldscope.v1.ProcessTimeline.EnvEntry.key",
                                          "ldscope.v1.ProcessTimeline.EnvEntry.value",
                                          "ldscope.v1.ProcessTimeline.argv",
                                          "ldscope.v1.ProcessTimeline.cwd",
                                          "ldscope.v1.ProcessTimeline.exe",
                                          "ldscope.v1.ProcessTimeline.exe_after",
                                          "ldscope.v1.PyImportSpan.error",
                                          "ldscope.v1.PyImportSpan.module",
                                          "ldscope.v1.PythonInfo.executable",
                                          "ldscope.v1.SourceLine.file",
                                          "ldscope.v1.SourceLine.function"};
  EXPECT_EQ(holding, expected);
}

// Each string of shown against the same string of model: escaped, or (in a trace's
// problems, which are text) the same; the number compared goes to *n.
void ExpectEscaped(const google::protobuf::Message& model, const google::protobuf::Message& shown, size_t* n) {
  const auto* d = model.GetDescriptor();
  const auto* r = model.GetReflection();
  const bool text = d->full_name() == "ldscope.v1.TraceProblem";
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    const int count = f->is_repeated() ? r->FieldSize(model, f) : 1;
    for (int k = 0; k < count; ++k) {
      if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (f->is_repeated())
          ExpectEscaped(r->GetRepeatedMessage(model, f, k), r->GetRepeatedMessage(shown, f, k), n);
        else if (r->HasField(model, f))
          ExpectEscaped(r->GetMessage(model, f), r->GetMessage(shown, f), n);
      } else if (f->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
        const std::string a = f->is_repeated() ? r->GetRepeatedString(model, f, k) : r->GetString(model, f);
        const std::string b = f->is_repeated() ? r->GetRepeatedString(shown, f, k) : r->GetString(shown, f);
        EXPECT_EQ(b, text ? a : text::Escape(a)) << f->full_name();
        ++*n;
      }
    }
  }
}

// The model holds bytes; a renderer that prints its messages whole (show's JSON, JUnit,
// Chrome, OTLP) escapes every string of the schema, but the trace's problems, which are
// the reader's text.
TEST(Timeline, EveryStringOfTheTimelineIsEscapedWhenPrintedWhole) {
  v1::Timeline t;
  std::vector<std::string> filled;
  testing::FillBytes(&t, "a\xff\n\\\x01", {}, &filled, 0, google::protobuf::FieldDescriptor::TYPE_STRING);
  size_t n = 0;
  ExpectEscaped(t, render::ShownTimeline(t), &n);
  EXPECT_GE(n, 40u);  // the schema's strings, not a few of them
}

}  // namespace
}  // namespace ldscope
