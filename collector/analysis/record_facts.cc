// See record_facts.h.
#include "analysis/record_facts.h"

#include <time.h>

#include <map>
#include <memory>
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

}  // namespace

RecordedFacts RecordFacts(const std::set<std::string>& paths, int limit_ms) {
  RecordedFacts out;
  const long deadline = NowMs() + limit_ms;
  struct File {
    std::unique_ptr<elf::ElfInfo> info;
    std::vector<std::string> paths;  // escaped
  };
  std::vector<File> files;
  std::map<std::string, size_t> by_build_id;
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, int64_t>, size_t> by_inode;
  for (const auto& raw : paths) {
    if (NowMs() > deadline) {
      ++out.skipped;
      continue;
    }
    ++out.files;
    const std::string path = text::Escape(raw);
    Result<std::unique_ptr<elf::ElfInfo>> read = elf::ReadElf(path);
    if (!read.ok()) {
      out.records.push_back(elf::UnreadableFacts(path, read.error()));
      continue;
    }
    std::unique_ptr<elf::ElfInfo> info = std::move(read).value();
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
  for (const auto& f : files) {
    v1::ObjectFacts r = elf::ToFacts(*f.info, keep, Found(*f.info));
    for (size_t i = 1; i < f.paths.size(); ++i) r.add_paths(text::Unescape(f.paths[i]));
    out.records.push_back(std::move(r));
  }
  return out;
}

}  // namespace ldscope::analysis
