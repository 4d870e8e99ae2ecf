// See record_facts.h.
#include "analysis/record_facts.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <unordered_set>

#include "analysis/families.h"
#include "elf/elf_file.h"
#include "elf/facts.h"
#include "text/escape.h"

namespace ldscope::analysis {
namespace {

long NowMs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

// What the passes search for in the file's bytes (Context::VersionOf, RuntimeVersion),
// under the same conditions.
std::map<std::string, std::vector<std::string>> Found(const elf::ElfInfo& e) {
  std::map<std::string, std::vector<std::string>> found;
  const std::string name = e.soname.empty() ? e.path : e.soname;
  if (Family(name) == "libnccl") {
    const std::string s = elf::FindString(e.path, "NCCL version ");
    found["NCCL version "] = s.empty() ? std::vector<std::string>{} : std::vector<std::string>{s};
  }
  const RuntimeId id = Classify(name, &e);
  // FindStrings takes the file's bytes and gives them back unescaped: escape them as
  // FindString does (elf::ToFacts unescapes every found string).
  auto strings = [&](const char* needle) {
    auto& list = found[needle];
    for (const auto& s : elf::FindStrings(text::Unescape(e.path), needle)) list.push_back(text::Escape(s));
  };
  if (id.implementation == "OpenBLAS") strings("OpenBLAS ");
  if (id.implementation == "MKL") strings("Math Kernel Library Version ");
  return found;
}

// Runs f(0) .. f(n - 1) on up to 8 threads (each index once; in no particular order). Reading
// and summarising files is mostly open/mmap/munmap and page faults, which cores do side by
// side: the traced programs have ended, and `run` waits for this.
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

}  // namespace

RecordedFacts RecordFacts(const std::set<std::string>& paths, int limit_ms) {
  RecordedFacts out;
  const long deadline = NowMs() + limit_ms;
  // Read in parallel; what was not begun by the deadline stays unread (no record).
  const std::vector<std::string> all(paths.begin(), paths.end());
  struct Read {
    bool begun = false;
    std::unique_ptr<elf::ElfInfo> info;
    std::string error;  // when info is null
  };
  std::vector<Read> reads(all.size());
  ParallelFor(all.size(), [&](size_t i) {
    if (NowMs() > deadline) return;
    Result<std::unique_ptr<elf::ElfInfo>> r = elf::ReadElf(text::Escape(all[i]));
    reads[i].begun = true;
    if (r.ok())
      reads[i].info = std::move(r).value();
    else
      reads[i].error = r.error();
  });
  struct File {
    std::unique_ptr<elf::ElfInfo> info;
    std::vector<std::string> paths;  // escaped
  };
  std::vector<File> files;
  std::map<std::string, size_t> by_build_id;
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, int64_t>, size_t> by_inode;
  for (size_t i = 0; i < all.size(); ++i) {  // in path order, as one thread would
    if (!reads[i].begun) {
      ++out.skipped;
      continue;
    }
    ++out.files;
    const std::string path = text::Escape(all[i]);
    if (reads[i].info == nullptr) {
      out.records.push_back(elf::UnreadableFacts(path, reads[i].error));
      continue;
    }
    std::unique_ptr<elf::ElfInfo> info = std::move(reads[i].info);
    size_t* same = nullptr;
    if (!info->build_id.empty()) {
      auto [it, inserted] = by_build_id.try_emplace(info->build_id, files.size());
      if (!inserted) same = &it->second;
    } else {
      auto [it, inserted] = by_inode.try_emplace({info->dev, info->ino, info->size, info->mtime_ns}, files.size());
      if (!inserted) same = &it->second;
    }
    if (same != nullptr) {
      files[*same].paths.push_back(path);
      continue;
    }
    files.push_back({std::move(info), {path}});
  }
  // The names some object leaves undefined: the only names lookups ask for.
  std::unordered_set<uint64_t> wanted;
  for (const auto& f : files)
    f.info->ForEachSymbol(elf::ElfInfo::Which::kUndefined,
                          [&](const elf::Symbol& s) { wanted.insert(elf::HashOf(s)); });
  auto keep = [&](const elf::Symbol& s) {
    if (IsMarkerSymbol(s.name)) return elf::Keep::kName;
    return wanted.count(elf::HashOf(s)) != 0 ? elf::Keep::kHash : elf::Keep::kDrop;
  };
  std::vector<v1::ObjectFacts> made(files.size());
  ParallelFor(files.size(), [&](size_t i) {
    const File& f = files[i];
    made[i] = elf::ToFacts(*f.info, keep, Found(*f.info));
    for (size_t k = 1; k < f.paths.size(); ++k) made[i].add_paths(text::Unescape(f.paths[k]));
  });
  for (auto& r : made) out.records.push_back(std::move(r));
  return out;
}

}  // namespace ldscope::analysis
