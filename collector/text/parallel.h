// The collector's one pool of worker threads: work over indexes on a few threads, for
// the layers that read many independent things at once (a trace's records checked,
// files read for the analysis and for a trace's facts).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace ldscope::text {

// Runs f(0) .. f(n - 1) on up to 8 threads, one per `per_thread` indexes at most (each
// index once, in no particular order, claimed one at a time so that a slow index holds
// up only its own thread); n below per_thread runs on the caller's thread alone.
// Reading and summarising files is mostly open/mmap/munmap and page faults: the H200's
// 16 cores read import torch's files for a report in 3 ms, where a 2-core VM takes
// 20 ms with one thread or two (bench/RESULTS.md, "Reading files ahead"). f must touch
// nothing that another index's call touches.
template <typename F>
void ParallelFor(size_t n, size_t per_thread, F&& f) {
  const size_t threads =
      std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 8, n / std::max<size_t>(per_thread, 1) + 1});
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) f(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace ldscope::text
