// The hand-written protobuf encoders against libprotobuf: everything the audit library
// (audit/encode.cc) and the Python hook (python/_ldscope_hook.py) write must parse into
// the generated classes with the same field values, the same message libprotobuf builds
// from those values, and no field the schema does not know.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "encode.h"
#include "ipc/server.h"
#include "ldscope_proto/events.pb.h"
#include "support/test_support.h"
#include "wire.h"

namespace ldscope {
namespace {

// encode.h's field numbers are the schema's (a renumbered field fails the build here).
static_assert(static_cast<int>(audit::field::kPid) == v1::Event::kPidFieldNumber);
static_assert(static_cast<int>(audit::field::kTid) == v1::Event::kTidFieldNumber);
static_assert(static_cast<int>(audit::field::kSeq) == v1::Event::kSeqFieldNumber);
static_assert(static_cast<int>(audit::field::kMonoNs) == v1::Event::kMonoNsFieldNumber);
static_assert(static_cast<int>(audit::field::kDropped) == v1::Event::kDroppedFieldNumber);
static_assert(static_cast<int>(audit::field::kTruncated) == v1::Event::kTruncatedFieldNumber);
static_assert(static_cast<int>(audit::field::kOffsetNs) == v1::Event::kOffsetNsFieldNumber);
static_assert(static_cast<int>(audit::field::kProcessStart) == v1::Event::kProcessStartFieldNumber);
static_assert(static_cast<int>(audit::field::kSearch) == v1::Event::kSearchFieldNumber);
static_assert(static_cast<int>(audit::field::kObjOpen) == v1::Event::kObjopenFieldNumber);
static_assert(static_cast<int>(audit::field::kObjClose) == v1::Event::kObjcloseFieldNumber);
static_assert(static_cast<int>(audit::field::kActivity) == v1::Event::kActivityFieldNumber);
static_assert(static_cast<int>(audit::field::kPreinit) == v1::Event::kPreinitFieldNumber);
static_assert(static_cast<int>(audit::field::kExit) == v1::Event::kExitFieldNumber);

// Equal as messages (field order on the wire is free), with the differences named.
void ExpectSameMessage(const google::protobuf::Message& got, const google::protobuf::Message& want) {
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(want, got)) << diff;
}

// No field anywhere in m that the schema does not define (a wrong hand-written tag
// parses as an unknown field, or fails to parse).
void ExpectNoUnknownFields(const google::protobuf::Message& m) {
  const auto* r = m.GetReflection();
  EXPECT_TRUE(r->GetUnknownFields(m).empty()) << m.GetTypeName() << ": " << m.ShortDebugString();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated())
      for (int i = 0; i < r->FieldSize(m, f); ++i) ExpectNoUnknownFields(r->GetRepeatedMessage(m, f, i));
    else
      ExpectNoUnknownFields(r->GetMessage(m, f));
  }
}

using audit::EventHead;

EventHead Head() {
  EventHead h;
  h.pid = 4242;
  h.tid = 4243;
  h.seq = 300;  // multi-byte varint
  h.mono_ns = 123456789012345ull;
  h.dropped = 7;
  return h;
}

void ExpectHead(const v1::Event& e) {
  EXPECT_EQ(e.pid(), 4242u);
  EXPECT_EQ(e.tid(), 4243u);
  EXPECT_EQ(e.seq(), 300u);
  EXPECT_EQ(e.mono_ns(), 123456789012345ull);
  EXPECT_EQ(e.dropped(), 7u);
}

// The head libprotobuf would write for Head().
v1::Event HeadMessage() {
  v1::Event e;
  e.set_pid(4242);
  e.set_tid(4243);
  e.set_seq(300);
  e.set_mono_ns(123456789012345ull);
  e.set_dropped(7);
  return e;
}

template <typename F>
v1::Event EncodeAndParse(F&& encode, size_t cap = 65536, bool* truncated = nullptr) {
  std::string buf(cap, '\0');
  wire::Writer w(reinterpret_cast<uint8_t*>(buf.data()), cap);
  encode(w);
  if (truncated) *truncated = w.truncated();
  v1::Event e;
  EXPECT_TRUE(e.ParseFromArray(w.data(), static_cast<int>(w.size())))
      << "hand-encoded event does not parse";
  ExpectNoUnknownFields(e);
  return e;
}

// A forked python3.11's start (reason 2: fork) with the given command line and
// environment, as both ProcessStart tests encode it.
audit::ProcessStartInfo SampleStart(const char* cmdline, size_t len, char** env) {
  audit::ProcessStartInfo p;
  p.reason = 2;
  p.ppid = 1;
  p.exe = "/usr/bin/python3.11";
  p.cmdline = cmdline;
  p.cmdline_len = len;
  p.cwd = "/work";
  p.glibc_version = "2.36";
  p.environ = env;
  p.image_start_ns = 555;
  p.lav_version = 2;
  return p;
}

TEST(Conformance, Search) {
  auto e = EncodeAndParse([](wire::Writer& w) {
    audit::SearchInfo s;
    s.name = "libnccl.so.2";
    s.flag = 1;
    s.requester = 17;
    audit::EncodeSearch(w, Head(), s);
  });
  ExpectHead(e);
  ASSERT_TRUE(e.has_search());
  EXPECT_EQ(e.search().name(), "libnccl.so.2");
  EXPECT_EQ(e.search().candidate(), "");
  EXPECT_EQ(e.search().flag(), 1u);
  EXPECT_EQ(e.search().requester(), 17u);
  EXPECT_FALSE(e.truncated());

  auto c = EncodeAndParse([](wire::Writer& w) {
    audit::SearchInfo s;
    s.candidate = "/opt/lib/glibc-hwcaps/x86-64-v3/libnccl.so.2";
    s.flag = 4;
    s.requester = 17;
    audit::EncodeSearch(w, Head(), s);
  });
  EXPECT_EQ(c.search().candidate(), "/opt/lib/glibc-hwcaps/x86-64-v3/libnccl.so.2");
  EXPECT_EQ(c.search().flag(), 4u);
  // Interned: a directory reference, its text when defined, and a differing file name.
  const std::string dir = "/opt/lib/glibc-hwcaps/x86-64-v3";
  auto d = EncodeAndParse([&](wire::Writer& w) {
    audit::SearchInfo s;
    s.dir_ref = 7;
    s.dir = dir.c_str();
    s.dir_len = dir.size();
    s.base = "libnccl.so.2.16.2";
    s.flag = 8;
    audit::EncodeSearch(w, Head(), s);
  });
  EXPECT_EQ(d.search().dir_ref(), 7u);
  EXPECT_EQ(d.search().dir(), dir);
  EXPECT_EQ(d.search().base(), "libnccl.so.2.16.2");
  EXPECT_EQ(d.search().candidate(), "");
}

TEST(Conformance, ObjOpenEveryField) {
  audit::ObjectInfo o;
  o.id = 99;
  o.path = "/site-packages/torch/lib/libtorch_cuda.so";
  o.lmid = 3;
  o.base = 0x7f0012340000ull;
  o.dev = 65024;
  o.ino = 10952891;
  o.soname = "libtorch_cuda.so";
  o.needed[0] = "libnccl.so.2";
  o.needed[1] = "libc.so.6";
  o.n_needed = 2;
  o.rpath = "$ORIGIN/../../nvidia/nccl/lib";
  o.runpath = "/opt/runpath";
  for (int i = 0; i < 20; ++i) o.build_id[i] = static_cast<uint8_t>(0xf0 + i);
  o.build_id_len = 20;
  o.flags_1 = 0x800;
  o.is_main = true;
  o.is_vdso = true;
  o.is_ldso = true;
  o.cwd = "/home/user/project";
  auto e = EncodeAndParse([&](wire::Writer& w) { audit::EncodeObjOpen(w, Head(), o); });
  ExpectHead(e);
  const auto& p = e.objopen();
  EXPECT_EQ(p.id(), 99u);
  EXPECT_EQ(p.path(), o.path);
  EXPECT_EQ(p.lmid(), 3);
  EXPECT_EQ(p.base(), o.base);
  EXPECT_EQ(p.dev(), 65024u);
  EXPECT_EQ(p.ino(), 10952891u);
  EXPECT_EQ(p.soname(), "libtorch_cuda.so");
  ASSERT_EQ(p.needed_size(), 2);
  EXPECT_EQ(p.needed(0), "libnccl.so.2");
  EXPECT_EQ(p.needed(1), "libc.so.6");
  EXPECT_EQ(p.rpath(), o.rpath);
  EXPECT_EQ(p.runpath(), "/opt/runpath");
  EXPECT_EQ(p.build_id(), std::string(reinterpret_cast<char*>(o.build_id), 20));
  EXPECT_EQ(p.flags_1(), 0x800u);
  EXPECT_TRUE(p.is_main());
  EXPECT_TRUE(p.is_vdso());
  EXPECT_TRUE(p.is_ldso());
  EXPECT_EQ(p.cwd(), "/home/user/project");
  // The same message as libprotobuf builds from those values.
  v1::Event want = HeadMessage();
  auto* m = want.mutable_objopen();
  m->set_id(99);
  m->set_path(o.path);
  m->set_lmid(3);
  m->set_base(o.base);
  m->set_dev(65024);
  m->set_ino(10952891);
  m->set_soname("libtorch_cuda.so");
  m->add_needed("libnccl.so.2");
  m->add_needed("libc.so.6");
  m->set_rpath(o.rpath);
  m->set_runpath("/opt/runpath");
  m->set_build_id(std::string(reinterpret_cast<char*>(o.build_id), 20));
  m->set_flags_1(0x800);
  m->set_is_main(true);
  m->set_is_vdso(true);
  m->set_is_ldso(true);
  m->set_cwd("/home/user/project");
  ExpectSameMessage(e, want);
}

// Every other body, each against the message libprotobuf builds.
TEST(Conformance, SameMessagesAsLibprotobuf) {
  {
    auto got = EncodeAndParse([](wire::Writer& w) {
      audit::SearchInfo s;
      s.name = "libnccl.so.2";
      s.dir_ref = 7;
      s.dir = "/opt/lib";
      s.dir_len = 8;
      s.base = "libnccl.so.2.16.2";
      s.flag = 8;
      s.requester = 17;
      audit::EncodeSearch(w, Head(), s);
    });
    v1::Event want = HeadMessage();
    auto* s = want.mutable_search();
    s->set_name("libnccl.so.2");
    s->set_dir_ref(7);
    s->set_dir("/opt/lib");
    s->set_base("libnccl.so.2.16.2");
    s->set_flag(8);
    s->set_requester(17);
    ExpectSameMessage(got, want);
  }
  {
    auto got = EncodeAndParse([](wire::Writer& w) { audit::EncodeObjClose(w, Head(), 5, true); });
    v1::Event want = HeadMessage();
    want.mutable_objclose()->set_id(5);
    want.mutable_objclose()->set_unrelocated(true);
    ExpectSameMessage(got, want);
  }
  {
    auto got = EncodeAndParse([](wire::Writer& w) { audit::EncodeActivity(w, Head(), 2, 1); });
    v1::Event want = HeadMessage();
    want.mutable_activity()->set_kind(v1::ACTIVITY_DELETE);
    want.mutable_activity()->set_id(1);
    ExpectSameMessage(got, want);
  }
  {
    auto h = Head();
    h.image_start_ns = 123456000000000ull;
    auto got = EncodeAndParse([&](wire::Writer& w) { audit::EncodePreinit(w, h); });
    v1::Event want = HeadMessage();
    want.clear_mono_ns();
    want.set_offset_ns(789012345ull);
    want.mutable_preinit();
    ExpectSameMessage(got, want);
  }
  {
    auto got = EncodeAndParse([](wire::Writer& w) { audit::EncodeExit(w, Head()); });
    v1::Event want = HeadMessage();
    want.mutable_exit();
    ExpectSameMessage(got, want);
  }
  {
    const char cmdline[] = "python3\0-c\0pass\0";
    char e1[] = "LD_PRELOAD=/opt/libx.so";
    char e2[] = "HOME=/root";
    char* env[] = {e1, e2, nullptr};
    audit::ProcessStartInfo p = SampleStart(cmdline, sizeof cmdline - 1, env);
    auto got = EncodeAndParse([&](wire::Writer& w) { audit::EncodeProcessStart(w, Head(), p); });
    v1::Event want = HeadMessage();
    auto* s = want.mutable_process_start();
    s->set_reason(v1::START_FORK);
    s->set_ppid(1);
    s->set_exe("/usr/bin/python3.11");
    for (const char* a : {"python3", "-c", "pass"}) s->add_argv(a);
    s->set_cwd("/work");
    s->set_glibc_version("2.36");
    auto* preload = s->add_env();
    preload->set_name("LD_PRELOAD");
    preload->set_value("/opt/libx.so");
    auto* home = s->add_env();
    home->set_name("HOME");
    home->set_redacted(true);
    s->set_image_start_ns(555);
    s->set_lav_version(2);
    ExpectSameMessage(got, want);
  }
}

TEST(Conformance, NegativeLmidRoundTrips) {
  audit::ObjectInfo o;
  o.id = 1;
  o.lmid = -2;
  auto e = EncodeAndParse([&](wire::Writer& w) { audit::EncodeObjOpen(w, Head(), o); });
  EXPECT_EQ(e.objopen().lmid(), -2);
}

TEST(Conformance, ProcessStartKeepsOnlyLoaderRelevantValues) {
  const char cmdline[] = "python3\0-c\0import torch\0";
  char e1[] = "LD_LIBRARY_PATH=/opt/cuda/lib64";
  char e2[] = "AWS_SECRET_ACCESS_KEY=hunter2";
  char e3[] = "PATH=/usr/bin";
  char e4[] = "NCCL_DEBUG=INFO";
  char e5[] = "PATHOLOGICAL=nope";
  char* env[] = {e1, e2, e3, e4, e5, nullptr};
  audit::ProcessStartInfo p = SampleStart(cmdline, sizeof cmdline - 1, env);
  p.parent_pid = 4000;
  p.parent_image_start_ns = 444;
  p.parent_seq_at_fork = 12;
  p.lav_version = 2;
  p.secure = true;
  auto e = EncodeAndParse([&](wire::Writer& w) { audit::EncodeProcessStart(w, Head(), p); });
  ExpectHead(e);
  const auto& s = e.process_start();
  EXPECT_EQ(s.reason(), v1::START_FORK);
  EXPECT_EQ(s.ppid(), 1);
  EXPECT_EQ(s.exe(), "/usr/bin/python3.11");
  ASSERT_EQ(s.argv_size(), 3);
  EXPECT_EQ(s.argv(2), "import torch");
  EXPECT_EQ(s.cwd(), "/work");
  EXPECT_EQ(s.glibc_version(), "2.36");
  EXPECT_EQ(s.image_start_ns(), 555u);
  EXPECT_EQ(s.parent_pid(), 4000);
  EXPECT_EQ(s.parent_image_start_ns(), 444u);
  EXPECT_EQ(s.parent_seq_at_fork(), 12u);
  EXPECT_EQ(s.lav_version(), 2u);
  EXPECT_TRUE(s.secure());
  // Loader-relevant variables first (they must survive a full budget), then the rest.
  ASSERT_EQ(s.env_size(), 5);
  EXPECT_EQ(s.env(0).name(), "LD_LIBRARY_PATH");
  EXPECT_EQ(s.env(0).value(), "/opt/cuda/lib64");
  EXPECT_FALSE(s.env(0).redacted());
  EXPECT_EQ(s.env(1).value(), "/usr/bin");
  EXPECT_EQ(s.env(2).value(), "INFO");
  EXPECT_EQ(s.env(3).name(), "AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(s.env(3).value(), "");
  EXPECT_TRUE(s.env(3).redacted());
  EXPECT_EQ(s.env(4).name(), "PATHOLOGICAL");
  EXPECT_TRUE(s.env(4).redacted()) << "PATHOLOGICAL is not PATH";
  EXPECT_EQ(e.SerializeAsString().find("hunter2"), std::string::npos);
}

TEST(Conformance, ProcessStartKeepsRankVariables) {
  char e1[] = "RANK=3";
  char e2[] = "LOCAL_RANK=1";
  char e3[] = "SLURM_PROCID=7";
  char e4[] = "OMPI_COMM_WORLD_RANK=2";
  char e5[] = "FRANK=secret";
  char* env[] = {e1, e2, e3, e4, e5, nullptr};
  audit::ProcessStartInfo p;
  p.environ = env;
  auto e = EncodeAndParse([&](wire::Writer& w) { audit::EncodeProcessStart(w, Head(), p); });
  const auto& s = e.process_start();
  ASSERT_EQ(s.env_size(), 5);
  EXPECT_EQ(s.env(0).value(), "3");
  EXPECT_EQ(s.env(1).value(), "1");
  EXPECT_EQ(s.env(2).value(), "7");
  EXPECT_EQ(s.env(3).value(), "2");
  EXPECT_TRUE(s.env(4).redacted()) << "FRANK is not RANK";
}

TEST(Conformance, TimestampAsOffsetFromTheImageStart) {
  auto h = Head();
  h.image_start_ns = 123456000000000ull;
  auto e = EncodeAndParse([&](wire::Writer& w) { audit::EncodePreinit(w, h); });
  EXPECT_EQ(e.mono_ns(), 0u);
  EXPECT_EQ(e.offset_ns(), 789012345ull);
}

TEST(Conformance, CloseActivityPreinitExit) {
  auto c = EncodeAndParse([](wire::Writer& w) { audit::EncodeObjClose(w, Head(), 5, true); });
  EXPECT_EQ(c.objclose().id(), 5u);
  EXPECT_TRUE(c.objclose().unrelocated());
  auto a = EncodeAndParse([](wire::Writer& w) { audit::EncodeActivity(w, Head(), 2, 1); });
  EXPECT_EQ(a.activity().kind(), v1::ACTIVITY_DELETE);
  EXPECT_EQ(a.activity().id(), 1u);
  auto p = EncodeAndParse([](wire::Writer& w) { audit::EncodePreinit(w, Head()); });
  EXPECT_TRUE(p.has_preinit());
  auto x = EncodeAndParse([](wire::Writer& w) { audit::EncodeExit(w, Head()); });
  EXPECT_TRUE(x.has_exit());
  ExpectHead(x);
}

TEST(Conformance, TraceHeader) {
  uint8_t buf[512];
  wire::Writer w(buf, sizeof buf);
  audit::EncodeTraceHeader(w, "host1", "2.36", 1700000000000000000ull, 0);
  v1::TraceHeader h;
  ASSERT_TRUE(h.ParseFromArray(w.data(), static_cast<int>(w.size())));
  ExpectNoUnknownFields(h);
  EXPECT_EQ(h.format_version(), 1u);
  EXPECT_EQ(h.host(), "host1");
  EXPECT_EQ(h.glibc_version(), "2.36");
  EXPECT_EQ(h.start_unix_ns(), 1700000000000000000ull);
  EXPECT_EQ(h.writer(), "libldscope_audit");
}

TEST(Conformance, OverlongStringIsCutAndFlagged) {
  const std::string longname(10000, 'x');
  auto e = EncodeAndParse([&](wire::Writer& w) {
    audit::SearchInfo s;
    s.name = longname.c_str();
    s.flag = 1;
    s.requester = 1;
    audit::EncodeSearch(w, Head(), s);
  });
  EXPECT_EQ(e.search().name(), std::string(audit::kMaxString, 'x'));
  EXPECT_TRUE(e.truncated());
}

// Whatever the buffer size, the output parses; what did not fit is flagged.
TEST(Conformance, EveryBufferSizeGivesAParsableEvent) {
  audit::ObjectInfo o;
  o.id = 7;
  o.path = "/a/rather/long/path/to/some/library/libsomething.so.1.2.3";
  o.soname = "libsomething.so.1";
  for (size_t i = 0; i < 40; ++i) o.needed[i] = "libneeded-dependency.so.9";
  o.n_needed = 40;
  for (size_t cap = 0; cap < 1400; cap += 3) {
    bool truncated = false;
    auto e = EncodeAndParse([&](wire::Writer& w) { audit::EncodeObjOpen(w, Head(), o); }, cap,
                            &truncated);
    if (e.has_objopen() && e.objopen().needed_size() == 40) {
      EXPECT_EQ(e.objopen().path(), o.path);
    } else {
      EXPECT_TRUE(truncated) << "cap " << cap;
    }
  }
}

// The Python hook's events: run the hook against a socket of our own, take every
// datagram it sends, turn it into events as the collector does (ipc::SplitDatagram: the
// hook sends raw facts, ipc/pyhook.h), parse those with libprotobuf and compare with the
// messages libprotobuf builds for what the program did (an import, a ctypes dlopen).
TEST(Conformance, PythonHookSendsTheSchemasMessages) {
  const std::string dir = testing::ScratchDir("conformance_python");
  const std::string sock = dir + "/s";
  const int lfd = testing::ListenSeqpacket(sock);
  // The connection waits in the backlog, its datagrams queued, until the program ended.
  const auto r = testing::RunCmd({"/usr/bin/python3", "-c", "import fractions, ctypes\nctypes.CDLL('libm.so.6')"},
                                 {"PYTHONPATH=" PYTHON_HOOK_DIR, "LDSCOPE_SOCKET=" + sock},
                                 {"PYTHONSAFEPATH", "PYTHONNOUSERSITE"});
  ASSERT_EQ(r.code, 0) << r.err;
  bool connected = false;
  const std::vector<std::string> datagrams = testing::ReceiveDatagrams(lfd, &connected);
  ASSERT_TRUE(connected) << "the hook did not connect";
  std::vector<v1::Event> events;
  for (const std::string& d : datagrams) {
    std::vector<std::string> owned;
    std::vector<ipc::FrameSlice> slices;
    ASSERT_TRUE(ipc::SplitDatagram(reinterpret_cast<const uint8_t*>(d.data()), d.size(), &owned, &slices))
        << "datagram does not parse";
    for (const auto& sl : slices) {
      v1::Event e;
      ASSERT_TRUE(ipc::ParseFrame(sl.data, sl.size, &e)) << "event does not parse";
      ExpectNoUnknownFields(e);
      events.push_back(e);
    }
  }
  ASSERT_FALSE(events.empty());
  // The head: one pid, a thread, a time, sequence numbers from 0 without gaps.
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].pid(), events[0].pid());
    EXPECT_NE(events[i].pid(), 0u);
    EXPECT_NE(events[i].tid(), 0u);
    EXPECT_NE(events[i].mono_ns(), 0u);
    EXPECT_EQ(events[i].seq(), i);
  }
  ASSERT_TRUE(events[0].has_py_start());
  EXPECT_EQ(events[0].py_start().executable(), "/usr/bin/python3");
  EXPECT_FALSE(events[0].py_start().version().empty());
  EXPECT_FALSE(events[0].py_start().forked());
  // The bodies, against libprotobuf's messages (the fields that vary cleared first).
  v1::PyFrame here;
  here.set_file("<string>");
  here.set_line(1);
  here.set_function("<module>");
  v1::PyImportBegin want_begin;
  want_begin.set_module("fractions");
  *want_begin.add_stack() = here;
  v1::PyImportEnd want_end;
  want_end.set_module("fractions");
  v1::PyDlopen want_dlopen;
  want_dlopen.set_name("libm.so.6");
  here.set_line(2);
  *want_dlopen.add_stack() = here;
  want_dlopen.set_via("ctypes.CDLL");
  bool begin = false, end = false, dlopen = false;
  for (const auto& e : events) {
    if (e.has_py_import() && e.py_import().module() == "fractions") {
      v1::PyImportBegin got = e.py_import();
      got.clear_dlopen_flags();  // the interpreter's sys.getdlopenflags()
      ExpectSameMessage(got, want_begin);
      begin = true;
    } else if (e.has_py_import_end() && e.py_import_end().module() == "fractions") {
      ExpectSameMessage(e.py_import_end(), want_end);
      end = true;
    } else if (e.has_py_dlopen()) {
      v1::PyDlopen got = e.py_dlopen();
      got.clear_mode();  // ctypes' default mode, as this Python reads it
      ExpectSameMessage(got, want_dlopen);
      dlopen = true;
    }
  }
  EXPECT_TRUE(begin && end && dlopen) << begin << end << dlopen;
}

}  // namespace
}  // namespace ldscope
