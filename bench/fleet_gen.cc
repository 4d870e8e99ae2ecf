// Makes a fleet of traces from one real trace, for timing `ldscope report` over many
// hosts (bench/RESULTS.md, "report over 1,000 hosts"):
//   fleet_gen TRACE OUTDIR COUNT ODD_EVERY SONAME
// writes OUTDIR/nodeNNNN/t.ldscope for NNNN in 0..COUNT-1: TRACE with the header's host
// set to nodeNNNN and, in every exec'd process, RANK=NNNN, LOCAL_RANK=0,
// WORLD_SIZE=COUNT, and other pids and times, as on real hosts: every pid and tid is
// shifted by 16 per node, every CLOCK_MONOTONIC time by 1.000003 ms per node (times
// relative to a process's start stay as they were). On every ODD_EVERY-th node (NNNN % ODD_EVERY == ODD_EVERY - 1) the
// object whose SONAME is SONAME is made another file: /opt/other/SONAME, another inode
// and build-id (what a node with another install of that library would record). The
// records are re-encoded with the schema's own classes; nothing else changes.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "ldscope_proto/events.pb.h"

namespace {

using ldscope::v1::Event;
using ldscope::v1::TraceHeader;

void SetEnv(ldscope::v1::ProcessStart* ps, const std::string& name, const std::string& value) {
  for (auto& e : *ps->mutable_env())
    if (e.name() == name) {
      e.set_value(value);
      e.set_redacted(false);
      return;
    }
  auto* e = ps->add_env();
  e->set_name(name);
  e->set_value(value);
}

void Put(std::string* out, const google::protobuf::MessageLite& m) {
  const std::string body = m.SerializeAsString();
  google::protobuf::io::StringOutputStream s(out);
  google::protobuf::io::CodedOutputStream c(&s);
  c.WriteVarint32(static_cast<uint32_t>(body.size()));
  c.WriteString(body);
}

// Another host's pids and boot time: pids and tids shifted by dpid, monotonic times by
// dns (0 stays 0: unknown).
void Vary(Event* e, uint32_t dpid, uint64_t dns) {
  if (e->pid() != 0) e->set_pid(e->pid() + dpid);
  if (e->tid() != 0) e->set_tid(e->tid() + dpid);
  if (e->mono_ns() != 0) e->set_mono_ns(e->mono_ns() + dns);
  if (!e->has_process_start()) return;
  auto* ps = e->mutable_process_start();
  if (ps->ppid() > 0) ps->set_ppid(ps->ppid() + static_cast<int32_t>(dpid));
  if (ps->parent_pid() > 0) ps->set_parent_pid(ps->parent_pid() + static_cast<int32_t>(dpid));
  if (ps->image_start_ns() != 0) ps->set_image_start_ns(ps->image_start_ns() + dns);
  if (ps->parent_image_start_ns() != 0) ps->set_parent_image_start_ns(ps->parent_image_start_ns() + dns);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: fleet_gen TRACE OUTDIR COUNT ODD_EVERY SONAME\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string outdir = argv[2], soname = argv[5];
  const int count = std::atoi(argv[3]), odd_every = std::atoi(argv[4]);
  google::protobuf::io::ArrayInputStream raw(data.data(), static_cast<int>(data.size()));
  google::protobuf::io::CodedInputStream cin(&raw);
  cin.SetTotalBytesLimit(INT32_MAX);
  TraceHeader header;
  std::vector<Event> events;
  for (bool first = true;; first = false) {
    uint32_t size = 0;
    if (!cin.ReadVarint32(&size)) break;
    const auto limit = cin.PushLimit(static_cast<int>(size));
    const bool ok = first ? header.ParseFromCodedStream(&cin) : events.emplace_back().ParseFromCodedStream(&cin);
    cin.PopLimit(limit);
    if (!ok) {
      std::fprintf(stderr, "fleet_gen: %s: a damaged record\n", argv[1]);
      return 1;
    }
  }
  const uint64_t base_mono = header.start_mono_ns();
  mkdir(outdir.c_str(), 0700);
  for (int i = 0; i < count; ++i) {
    char node[32];
    std::snprintf(node, sizeof node, "node%04d", i);
    const bool odd = odd_every > 0 && i % odd_every == odd_every - 1;
    std::string out;
    header.set_host(node);
    if (header.start_mono_ns() != 0) header.set_start_mono_ns(base_mono + 1000003ull * static_cast<uint64_t>(i));
    Put(&out, header);
    const uint32_t dpid = 16u * static_cast<uint32_t>(i);
    const uint64_t dns = 1000003ull * static_cast<uint64_t>(i);
    for (Event e : events) {
      Vary(&e, dpid, dns);
      if (e.has_process_start() && e.process_start().reason() == ldscope::v1::START_EXEC) {
        SetEnv(e.mutable_process_start(), "RANK", std::to_string(i));
        SetEnv(e.mutable_process_start(), "LOCAL_RANK", "0");
        SetEnv(e.mutable_process_start(), "WORLD_SIZE", std::to_string(count));
      }
      if (odd && e.has_objopen() && e.objopen().soname() == soname) {
        e.mutable_objopen()->set_path("/opt/other/" + soname);
        e.mutable_objopen()->set_ino(e.objopen().ino() + 1);
        e.mutable_objopen()->set_build_id(std::string(20, '\x42'));
      }
      Put(&out, e);
    }
    const std::string dir = outdir + "/" + node;
    mkdir(dir.c_str(), 0700);
    std::ofstream f(dir + "/t.ldscope", std::ios::binary);
    f << out;
    if (!f) {
      std::fprintf(stderr, "fleet_gen: cannot write %s/t.ldscope\n", dir.c_str());
      return 1;
    }
  }
  return 0;
}
