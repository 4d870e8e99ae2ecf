// Runs work over indexes on a few threads, for the analysis's file reading.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace ldscope::analysis {

// Runs f(0) .. f(n - 1) on up to 8 threads, one per 32 indexes at most (each index once,
// in no particular order). Reading and summarising files is mostly open/mmap/munmap and
// page faults: the H200's 16 cores read import torch's files for a report in 3 ms, where
// a 2-core VM takes 20 ms with one thread or two (bench/RESULTS.md, "Reading files ahead").
// f must touch nothing that another index's call touches.
template <typename F>
void ParallelFor(size_t n, F&& f) {
  const size_t threads = std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 8, n / 32 + 1});
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) f(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace ldscope::analysis
