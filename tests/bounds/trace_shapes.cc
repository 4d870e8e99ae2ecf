// See trace_shapes.h.
#include "bounds/trace_shapes.h"

#include <zlib.h>

#include <functional>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "ldscope_proto/events.pb.h"
#include "store/trace_file.h"

namespace ldscope::testing {
namespace {

constexpr uint32_t kPid = 100;
constexpr uint64_t kStart = 1'000'000;
constexpr uint32_t kOrig = 0x01, kLibpath = 0x02;

// The events of a trace in the order a collector appends them, each with its stream.
class Events {
 public:
  using Fill = std::function<void(v1::Event&)>;
  // An event of the current image (pid, stream), its seq the next of the image's.
  void Add(const Fill& fill) {
    v1::Event e;
    e.set_pid(pid_);
    e.set_tid(pid_);
    e.set_seq(seq_++);
    e.set_offset_ns(1000 * e.seq());
    fill(e);
    out_.push_back({std::move(e), stream_});
  }
  // A new image: stream, pid, seq from 0.
  void Image(uint32_t stream, uint32_t pid) {
    stream_ = stream;
    pid_ = pid;
    seq_ = 0;
  }
  uint64_t seq() const { return seq_; }
  // A record of the collector's (stream 0, its own pid, no seq).
  void Collector(const Fill& fill) {
    v1::Event e;
    e.set_pid(1);
    fill(e);
    out_.push_back({std::move(e), 0});
  }
  const std::vector<std::pair<v1::Event, uint32_t>>& all() const { return out_; }

 private:
  std::vector<std::pair<v1::Event, uint32_t>> out_;
  uint32_t stream_ = 1, pid_ = kPid;
  uint64_t seq_ = 0;
};

void Start(Events& ev, v1::StartReason reason, uint64_t parent_seq = 0) {
  ev.Add([&](v1::Event& e) {
    auto* s = e.mutable_process_start();
    s->set_reason(reason);
    s->set_exe("/usr/bin/shape");
    s->add_argv("shape");
    s->set_cwd("/");
    s->set_glibc_version("2.36");
    s->set_image_start_ns(reason == v1::START_FORK ? kStart + 1000 * parent_seq : kStart);
    s->set_ppid(1);
    if (reason == v1::START_FORK) {
      s->set_ppid(kPid);
      s->set_parent_pid(kPid);
      s->set_parent_image_start_ns(kStart);
      s->set_parent_seq_at_fork(parent_seq);
    }
  });
}

void Activity(Events& ev, v1::ActivityKind kind) {
  ev.Add([&](v1::Event& e) {
    e.mutable_activity()->set_kind(kind);
    e.mutable_activity()->set_id(1);
  });
}

// The executable and ld.so, their start-up batch, preinit.
void StartUp(Events& ev) {
  Start(ev, v1::START_EXEC);
  ev.Add([](v1::Event& e) {
    auto* o = e.mutable_objopen();
    o->set_id(1);
    o->set_path("/usr/bin/shape");
    o->set_is_main(true);
  });
  ev.Add([](v1::Event& e) {
    auto* o = e.mutable_objopen();
    o->set_id(2);
    o->set_path("/lib64/ld-linux-x86-64.so.2");
    o->set_soname("ld-linux-x86-64.so.2");
    o->set_is_ldso(true);
  });
  Activity(ev, v1::ACTIVITY_ADD);
  Activity(ev, v1::ACTIVITY_CONSISTENT);
  ev.Add([](v1::Event& e) { e.mutable_preinit(); });
}

// A dlopen from the executable of name, found in dir, opened as object id.
void Dlopen(Events& ev, uint64_t id, const std::string& name, const std::string& dir, const std::string& soname,
            const std::vector<std::string>& needed) {
  Activity(ev, v1::ACTIVITY_ADD);
  ev.Add([&](v1::Event& e) {
    auto* s = e.mutable_search();
    s->set_name(name);
    s->set_flag(kOrig);
    s->set_requester(1);
  });
  ev.Add([&](v1::Event& e) {
    auto* s = e.mutable_search();
    s->set_flag(kLibpath);
    s->set_requester(1);
    s->set_candidate(dir + "/" + name);
  });
  ev.Add([&](v1::Event& e) {
    auto* o = e.mutable_objopen();
    o->set_id(id);
    o->set_path(dir + "/" + name);
    o->set_soname(soname);
    for (const auto& n : needed) o->add_needed(n);
    o->set_dev(1);
    o->set_ino(id);
  });
  Activity(ev, v1::ACTIVITY_CONSISTENT);
}

void Exit(Events& ev) {
  ev.Add([](v1::Event& e) { e.mutable_exit(); });
}

// One search name and one candidate directory of `width` bytes, sent once; `count`
// searches after it leave the name empty (the previous search's) and name the directory
// by its reference, as the audit library's wire economies allow.
void Strings(Events& ev, const ShapeSize& n) {
  StartUp(ev);
  const std::string name(n.width, 'n'), dir = "/" + std::string(n.width, 'd');
  Activity(ev, v1::ACTIVITY_ADD);
  for (uint64_t i = 0; i < n.count; ++i) {
    ev.Add([&](v1::Event& e) {
      auto* s = e.mutable_search();
      if (i == 0) s->set_name(name);
      s->set_flag(kOrig);
      s->set_requester(1);
    });
    ev.Add([&](v1::Event& e) {
      auto* s = e.mutable_search();
      s->set_flag(kLibpath);
      s->set_requester(1);
      s->set_dir_ref(1);
      if (i == 0) s->set_dir(dir);
    });
  }
  Activity(ev, v1::ACTIVITY_CONSISTENT);
  Exit(ev);
}

std::string Deflate(const std::string& in) {
  uLongf size = compressBound(in.size());
  std::string out(size, '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(in.data()), in.size(), 9);
  out.resize(size);
  return out;
}

// `width` libraries that are gone from disk (their facts stand in for them), each with a
// facts record declaring `count` defined symbols (one flag byte, version 0 and one hash
// each: a stream that deflates about a thousandfold).
void Facts(Events& ev, const ShapeSize& n) {
  StartUp(ev);
  for (uint64_t i = 0; i < n.width; ++i)
    Dlopen(ev, 10 + i, "libfacts" + std::to_string(i) + ".so", "/gone", "libfacts" + std::to_string(i) + ".so", {});
  Exit(ev);
  v1::SymbolFacts s;
  s.set_flags(std::string(n.count, '\x01'));
  for (uint64_t i = 0; i < n.count; ++i) {
    s.add_version(0);
    s.add_hashes(0x9e3779b97f4a7c15ull);
  }
  const std::string bytes = s.SerializeAsString(), zlib = Deflate(bytes);
  for (uint64_t i = 0; i < n.width; ++i)
    ev.Collector([&](v1::Event& e) {
      auto* f = e.mutable_object_facts();
      f->add_paths("/gone/libfacts" + std::to_string(i) + ".so");
      f->set_build_id(std::string(20, static_cast<char>(i)));
      f->set_size(4096);
      f->set_machine(62);
      f->set_soname("libfacts" + std::to_string(i) + ".so");
      f->set_symbols_zlib(zlib);
      f->set_symbols_size(static_cast<uint32_t>(bytes.size()));
    });
}

// An image of `width` objects, then `count` fork children of it that exit at once.
void Forks(Events& ev, const ShapeSize& n) {
  StartUp(ev);
  for (uint64_t i = 0; i < n.width; ++i)
    Dlopen(ev, 10 + i, "libf" + std::to_string(i) + ".so", "/f", "libf" + std::to_string(i) + ".so", {});
  const uint64_t at_fork = ev.seq();
  Exit(ev);
  for (uint64_t c = 0; c < n.count; ++c) {
    ev.Image(static_cast<uint32_t>(2 + c), static_cast<uint32_t>(1000 + c));
    Start(ev, v1::START_FORK, at_fork);
    Exit(ev);
  }
}

// `count` dlopened objects, each needing the `width` before it.
void Chain(Events& ev, const ShapeSize& n) {
  StartUp(ev);
  for (uint64_t i = 0; i < n.count; ++i) {
    std::vector<std::string> needed;
    for (uint64_t k = 1; k <= n.width && k <= i; ++k) needed.push_back("libc" + std::to_string(i - k) + ".so");
    Dlopen(ev, 10 + i, "libc" + std::to_string(i) + ".so", "/c", "libc" + std::to_string(i) + ".so", needed);
  }
  Exit(ev);
}

// `count` files of one SONAME, each dlopened by its own path, alive together.
void Sonames(Events& ev, const ShapeSize& n) {
  StartUp(ev);
  for (uint64_t i = 0; i < n.count; ++i)
    Dlopen(ev, 10 + i, "libdup.so.1", "/d/" + std::to_string(i), "libdup.so.1", {});
  Exit(ev);
}

Events Build(Shape s, const ShapeSize& n) {
  Events ev;
  switch (s) {
    case Shape::kStrings:
      Strings(ev, n);
      break;
    case Shape::kFacts:
      Facts(ev, n);
      break;
    case Shape::kForks:
      Forks(ev, n);
      break;
    case Shape::kChain:
      Chain(ev, n);
      break;
    case Shape::kSonames:
      Sonames(ev, n);
      break;
  }
  return ev;
}

v1::TraceHeader Header(const std::string& host = "shapes") {
  v1::TraceHeader h;
  h.set_format_version(1);
  h.set_host(host);
  h.set_glibc_version("2.36");
  h.set_start_unix_ns(1'700'000'000'000'000'000ull);
  h.set_start_mono_ns(kStart);
  h.set_writer("ldscope 0.1.0");
  return h;
}

void Put(std::string* out, const google::protobuf::MessageLite& m) {
  google::protobuf::io::StringOutputStream s(out);
  google::protobuf::io::CodedOutputStream c(&s);
  c.WriteVarint32(static_cast<uint32_t>(m.ByteSizeLong()));
  m.SerializeWithCachedSizes(&c);
}

}  // namespace

const std::vector<std::pair<std::string, Shape>>& Shapes() {
  static const std::vector<std::pair<std::string, Shape>> shapes = {{"strings", Shape::kStrings},
                                                                    {"facts", Shape::kFacts},
                                                                    {"forks", Shape::kForks},
                                                                    {"chain", Shape::kChain},
                                                                    {"sonames", Shape::kSonames}};
  return shapes;
}

ShapeSize FullSize(Shape s) {
  switch (s) {
    case Shape::kStrings:
      return {1500, 1u << 20};
    case Shape::kFacts:
      return {5'000'000, 5};
    case Shape::kForks:
      return {2000, 2000};
    case Shape::kChain:
      return {32000, 4};
    case Shape::kSonames:
      return {32000, 0};
  }
  return {};
}

std::string MakeTrace(Shape s, const ShapeSize& size) {
  std::string out;
  Put(&out, Header());
  const Events ev = Build(s, size);
  for (auto [e, stream] : ev.all()) {
    e.set_stream(stream);
    Put(&out, e);
  }
  return out;
}

bool WriteTrace(const std::string& path, Shape s, const ShapeSize& size, const std::string& host) {
  store::TraceWriter w;
  if (!w.Open(path, Header(host)).ok()) return false;
  const Events ev = Build(s, size);
  for (const auto& [e, stream] : ev.all()) {
    const std::string bytes = e.SerializeAsString();
    if (!w.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), stream).ok()) return false;
  }
  return w.Close().ok();
}

}  // namespace ldscope::testing
