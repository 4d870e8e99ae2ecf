// Fuzz target: valid traces of extreme but legal shapes (bounds/trace_shapes.h: long
// shared strings, many forks, deep dlopen chains, big facts, many copies of a SONAME),
// their sizes taken from the input, read as `show` and `report` read them (indexed, the
// timeline, its text, the analysis with the trace's facts). What the reader allocates
// at its peak (operator new's bytes, counted here) must stay within the documented
// bound of docs/ARCHITECTURE.md ("Bounds on reading a trace": 64 bytes per byte of
// trace above a base, here 32 MiB), not only not crash.
#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "analysis/analysis.h"
#include "bounds/trace_shapes.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"

namespace {
std::atomic<size_t> live{0}, peak{0};
void Count(void* p) {
  const size_t now = live += malloc_usable_size(p);
  size_t was = peak.load();
  while (now > was && !peak.compare_exchange_weak(was, now)) {
  }
}
}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  Count(p);
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  live -= malloc_usable_size(p);
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }
// The nothrow forms too (libFuzzer's own allocations use them): every form of new and
// delete then goes through malloc and free, which ASan checks as a pair.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p != nullptr) Count(p);
  return p;
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { operator delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { operator delete(p); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ldscope;
  if (size < 5) return 0;
  const auto& shapes = testing::Shapes();
  const testing::Shape shape = shapes[data[0] % shapes.size()].second;
  const uint32_t a = data[1] | data[2] << 8, b = data[3] | data[4] << 8;
  testing::ShapeSize n;
  switch (shape) {
    case testing::Shape::kStrings:
      n = {a % 4096, b * 4u % (256u << 10)};
      break;
    case testing::Shape::kFacts:
      n = {a * 8u, 1 + b % 4};
      break;
    case testing::Shape::kForks:
      n = {a % 512, b % 512};
      break;
    case testing::Shape::kChain:
      n = {a % 4096, b % 16};
      break;
    case testing::Shape::kSonames:
      n = {a % 4096, 0};
      break;
  }
  const std::string trace = testing::MakeTrace(shape, n);
  const size_t before = live.load();
  peak = before;
  {
    store::TraceSet set;
    set.files.push_back(
        store::ParseTrace("shape", reinterpret_cast<const uint8_t*>(trace.data()), trace.size(), /*indexed=*/true));
    const v1::Timeline timeline = model::BuildTimeline(set);
    (void)render::TimelineText(timeline, render::TextOptions());
    const elf::TraceFacts facts = analysis::FactsOf(set);
    (void)analysis::Analyze(timeline, &facts);
  }
  const size_t used = peak.load() - before, bound = 64 * trace.size() + (32u << 20);
  if (used > bound) {
    std::fprintf(stderr, "shape %u (%zu, %zu): %zu bytes of trace, %zu allocated at the peak (bound %zu)\n",
                 data[0] % 5u, static_cast<size_t>(n.count), static_cast<size_t>(n.width), trace.size(), used, bound);
    std::abort();
  }
  return 0;
}
