// Per-event cost of the audit library's hot path: encoding (the hand-written wire
// writer) and encode + send over a SOCK_SEQPACKET pair drained by another thread.
#include <benchmark/benchmark.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "encode.h"
#include "wire.h"

namespace {

using namespace ldscope;

audit::EventHead Head() {
  audit::EventHead h;
  h.pid = 4242;
  h.tid = 4243;
  h.seq = 1234;
  h.mono_ns = 987654321012ull;
  h.image_start_ns = 987000000000ull;
  return h;
}

audit::ObjectInfo Object() {
  audit::ObjectInfo o;
  o.id = 17;
  o.path = "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so";
  o.soname = "libtorch_cuda.so";
  const char* needed[] = {"libc10_cuda.so", "libcudart.so.13", "libnccl.so.2", "libc10.so",
                          "libtorch_cpu.so", "libstdc++.so.6", "libm.so.6", "libc.so.6"};
  for (const char* n : needed) o.needed[o.n_needed++] = n;
  o.rpath = "$ORIGIN/../../nvidia/cudnn/lib:$ORIGIN/../../nvidia/nccl/lib:$ORIGIN";
  o.build_id_len = 20;
  o.base = 0x7f0012340000ull;
  o.dev = 65024;
  o.ino = 123456;
  return o;
}

void BM_EncodeSearch(benchmark::State& state) {
  uint8_t buf[8192];
  for (auto _ : state) {
    wire::Writer w(buf, sizeof buf);
    audit::SearchInfo s;
    s.dir_ref = 3;  // the common case: an interned directory
    s.flag = 4;
    s.requester = 17;
    audit::EncodeSearch(w, Head(), s);
    benchmark::DoNotOptimize(w.size());
  }
}
BENCHMARK(BM_EncodeSearch);

void BM_EncodeObjOpen(benchmark::State& state) {
  uint8_t buf[16384];
  const auto o = Object();
  for (auto _ : state) {
    wire::Writer w(buf, sizeof buf);
    audit::EncodeObjOpen(w, Head(), o);
    benchmark::DoNotOptimize(w.size());
  }
}
BENCHMARK(BM_EncodeObjOpen);

void BM_EncodeAndSendSearch(benchmark::State& state) {
  int sv[2];
  socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv);
  std::atomic<bool> stop{false};
  std::thread drain([&] {
    char b[65536];
    while (recv(sv[1], b, sizeof b, 0) > 0) {
    }
  });
  uint8_t buf[8192];
  for (auto _ : state) {
    wire::Writer w(buf, sizeof buf);
    audit::SearchInfo s;
    s.dir_ref = 3;
    s.flag = 4;
    s.requester = 17;
    audit::EncodeSearch(w, Head(), s);
    send(sv[0], w.data(), w.size(), MSG_NOSIGNAL);
  }
  close(sv[0]);
  drain.join();
  close(sv[1]);
}
BENCHMARK(BM_EncodeAndSendSearch);

}  // namespace

BENCHMARK_MAIN();
