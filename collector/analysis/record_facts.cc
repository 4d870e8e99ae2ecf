// See record_facts.h.
#include "analysis/record_facts.h"

#include <time.h>

#include <algorithm>
#include <map>
#include <memory>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "analysis/families.h"
#include "text/parallel.h"
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
  auto strings = [&](const char* needle) {
    auto& list = found[needle];
    for (const auto& s : elf::FindStrings(e.path, needle)) list.push_back(s);
  };
  if (id.implementation == "OpenBLAS") strings("OpenBLAS ");
  if (id.implementation == "MKL") strings("Math Kernel Library Version ");
  return found;
}

}  // namespace

// One path's reading: everything about one file that does not depend on the others.
// The file itself is not kept (nor mapped) once this is made.
struct FactsReader::Read {
  bool begun = false;
  bool ok = false;
  std::unique_ptr<elf::ElfInfo> info;  // with FactsReader::KeepFiles
  std::string error;  // when not ok
  std::string loaded_build_id;  // not ok because the file is not the one loaded: that one's
  elf::PreparedFacts facts;  // when ok
  std::vector<uint64_t> undefined;  // the hashes of the names it leaves undefined
  // A record made in the background, before every file was known, with the names left
  // undefined by the files read until then; kept: its choice for each definition decided
  // by hash (FinishFacts's keep_hash calls, in order). MakeRecords uses it when the
  // names left undefined by all the files give the same choice.
  bool guessed = false;
  v1::ObjectFacts guess;
  std::vector<bool> kept;
  size_t known_at = 0;  // Known::log's size when the guess was made or last checked
  std::vector<uint64_t> decided;  // the hashes of its definitions decided by hash, sorted
};

// The names left undefined by the files the background thread read (each file's
// hashes counted once per occurrence), in the order they first came (log), and those
// files, in the order they were read.
struct FactsReader::Known {
  std::unordered_map<uint64_t, uint32_t> wanted;
  std::vector<uint64_t> log;
  std::vector<Read*> read;
  // What checking the records against later names may still cost (a lookup each, a
  // symbol each for a record made again), earned by reading: 4 per symbol read. Checks
  // can cost the square of the files (each file read, every record checked again); past
  // the budget, records are left unchecked and Finish compares them itself. import
  // torch's 282,266 symbols earned it 1.1 M; its checks took about 0.4 M.
  size_t budget = 1 << 16;
  bool Spend(size_t n) {
    if (budget < n) return budget = 0, false;
    budget -= n;
    return true;
  }
};

namespace {

// How the file read differs from the one the program loaded ("" when it does not, or
// when that is not known): the build-id, else the device and inode.
std::string Changed(const elf::ElfInfo& info, const FactsReader::Loaded* loaded) {
  if (loaded == nullptr) return "";
  if (!loaded->build_id.empty())
    return info.build_id == loaded->build_id ? "" : info.build_id.empty() ? "no build-id now" : "another build-id now";
  if (loaded->ino != 0 &&
      (static_cast<uint64_t>(info.dev) != loaded->dev || static_cast<uint64_t>(info.ino) != loaded->ino))
    return "another file now";
  return "";
}

std::shared_ptr<FactsReader::Read> ReadPath(const std::string& path, bool keep_file,
                                            const FactsReader::Loaded* loaded) {
  auto read = std::make_shared<FactsReader::Read>();
  read->begun = true;
  Result<std::unique_ptr<elf::ElfInfo>> r = elf::ReadElf(path);
  if (!r.ok()) {
    read->error = r.error();
    return read;
  }
  std::unique_ptr<elf::ElfInfo> info = std::move(r).value();
  if (const std::string how = Changed(*info, loaded); !how.empty()) {
    read->error = fmt::format("{}: the file changed after it was loaded ({}), before its facts were taken", path, how);
    read->loaded_build_id = loaded->build_id;
    return read;
  }
  read->ok = true;
  // Definitions of the runtime-family marker names are kept with their names; the rest
  // by hash where some object leaves the name undefined (MakeRecords).
  read->facts = elf::PrepareFacts(*info, [](const elf::Symbol& s) { return IsMarkerSymbol(s.name); },
                                  Found(*info));
  read->undefined = std::move(read->facts.undefined);
  if (keep_file) {
    info->ForEachUndefined([](const elf::Symbol&, const elf::SymbolQuery&) {});  // indexed now
    read->info = std::move(info);
  }
  return read;
}

// The records of the files among all (in path order), from their reads (null: not read).
// known: what the background thread read, when Finish read nothing itself.
RecordedFacts MakeRecords(const std::vector<std::string>& all,
                          const std::vector<FactsReader::Read*>& reads, FactsReader::Known* known) {
  RecordedFacts out;
  struct File {
    FactsReader::Read* read;
    std::vector<std::string> paths;
  };
  std::vector<File> files;
  std::map<std::string, size_t> by_build_id;
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, int64_t>, size_t> by_inode;
  for (size_t i = 0; i < all.size(); ++i) {  // in path order, as one thread would
    if (reads[i] == nullptr || !reads[i]->begun) {
      ++out.skipped;
      continue;
    }
    ++out.files;
    const std::string& path = all[i];
    if (!reads[i]->ok) {
      out.records.push_back(elf::UnreadableFacts(path, reads[i]->error));
      out.records.back().set_build_id(reads[i]->loaded_build_id);  // a changed file's: what was loaded
      continue;
    }
    const v1::ObjectFacts& info = reads[i]->facts.record;
    size_t* same = nullptr;
    if (!info.build_id().empty()) {
      auto [it, inserted] = by_build_id.try_emplace(info.build_id(), files.size());
      if (!inserted) same = &it->second;
    } else {
      auto [it, inserted] =
          by_inode.try_emplace({info.dev(), info.ino(), info.size(), info.mtime_ns()}, files.size());
      if (!inserted) same = &it->second;
    }
    if (same != nullptr) {
      files[*same].paths.push_back(path);
      continue;
    }
    files.push_back({reads[i], {path}});
  }
  // The names some object leaves undefined: the only names lookups ask for. They are
  // those the background thread knows when every file it read is among files (a
  // duplicate, or a path not asked for, may have added some no file of files leaves
  // undefined: then they are counted again).
  bool as_known = known != nullptr;
  if (as_known) {
    std::unordered_set<const FactsReader::Read*> used;
    for (const auto& f : files) used.insert(f.read);
    for (const FactsReader::Read* r : known->read)
      if (used.count(r) == 0)
        for (uint64_t h : r->undefined)
          if (--known->wanted[h] == 0) as_known = false;
  }
  std::unordered_set<uint64_t> counted;
  if (!as_known)
    for (const auto& f : files) counted.insert(f.read->undefined.begin(), f.read->undefined.end());
  auto wanted = [&](uint64_t h) { return as_known ? known->wanted.count(h) != 0 : counted.count(h) != 0; };
  std::vector<v1::ObjectFacts> made(files.size());
  text::ParallelFor(files.size(), 32, [&](size_t i) {
    const File& f = files[i];
    if (as_known && f.read->guessed && f.read->known_at == known->log.size()) {
      // Made, or checked, with every name the files leave undefined.
      made[i] = std::move(f.read->guess);
      for (size_t k = 1; k < f.paths.size(); ++k) made[i].add_paths(f.paths[k]);
      return;
    }
    // The choice of definitions, as FinishFacts makes it (one keep_hash call per
    // definition decided by hash, in order).
    std::vector<bool> kept;
    for (const elf::PreparedFacts::Sym& s : f.read->facts.symbols)
      if (s.defined && !(s.flags & elf::PreparedFacts::kNamed)) kept.push_back(wanted(s.hash));
    if (f.read->guessed && f.read->kept == kept) {
      made[i] = std::move(f.read->guess);  // the same choice: FinishFacts would make this record
    } else {
      size_t next = 0;
      made[i] = elf::FinishFacts(f.read->facts, [&](uint64_t) { return kept[next++]; });
    }
    for (size_t k = 1; k < f.paths.size(); ++k) made[i].add_paths(f.paths[k]);
  });
  for (auto& r : made) out.records.push_back(std::move(r));
  return out;
}

}  // namespace

RecordedFacts RecordFacts(const std::set<std::string>& paths, int limit_ms) {
  FactsReader reader;  // nothing added: Finish reads every path
  return reader.Finish(paths, limit_ms);
}

FactsReader::FactsReader() : known_(std::make_unique<Known>()) {}

FactsReader::~FactsReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void FactsReader::Add(const std::string& path, const Loaded& loaded) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!loaded.build_id.empty() || loaded.ino != 0) loaded_.try_emplace(path, loaded);
    if (stop_ || no_thread_) return;  // Finish reads it
    queue_.push_back(path);
    // Started with the first path: a run with --no-facts, or one whose programs load
    // nothing, never has the thread.
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Work(); });
      } catch (const std::system_error&) {
        no_thread_ = true;  // no thread to be had: Finish reads every path itself
        queue_.clear();
        return;
      }
    }
  }
  wake_.notify_one();
}

void FactsReader::Work() {
  Known& known = *known_;
  size_t guessed = 0;  // known.read[0 .. guessed) have their guess
  size_t checked = 0;  // and those of known.read[0 .. checked) were checked since the last read
  auto guess = [&](Read& r) {
    r.kept.clear();
    r.guess = elf::FinishFacts(r.facts, [&](uint64_t h) {
      r.kept.push_back(known.wanted.count(h) != 0);
      return r.kept.back();
    });
    r.guessed = true;
    r.known_at = known.log.size();
  };
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stop_) return;
    if (!queue_.empty()) {
      busy_ = true;
      const std::string path = std::move(queue_.front());
      queue_.pop_front();
      const auto l = loaded_.find(path);
      const Loaded* loaded = l == loaded_.end() ? nullptr : &l->second;  // stable: a map's node
      lock.unlock();
      // One path at a time, the lock released: Add never waits for a reading, and Finish
      // waits for at most the one in progress.
      auto& slot = done_[path];
      if (slot == nullptr) {
        slot = ReadPath(path, keep_files_, loaded);
        if (slot->ok) {
          known.read.push_back(slot.get());
          for (uint64_t h : slot->undefined)
            if (known.wanted[h]++ == 0) known.log.push_back(h);
          known.budget += 4 * slot->facts.symbols.size();
          checked = 0;
        }
      }
      lock.lock();
      continue;
    }
    if (guessed < known.read.size()) {
      // Nothing to read: the records, as they would be if no other file came.
      busy_ = true;
      lock.unlock();
      Read& r = *known.read[guessed++];
      for (const elf::PreparedFacts::Sym& s : r.facts.symbols)
        if (s.defined && !(s.flags & elf::PreparedFacts::kNamed)) r.decided.push_back(s.hash);
      std::sort(r.decided.begin(), r.decided.end());
      guess(r);
      lock.lock();
      continue;
    }
    if (checked < known.read.size() && known.budget > 0) {
      // Files read later often leave undefined what earlier ones define (a program's
      // libraries, then its plugins): a record whose definitions the names come since
      // would choose differently is made again.
      busy_ = true;
      lock.unlock();
      Read& r = *known.read[checked++];
      bool same = true;
      bool paid = true;
      for (size_t k = r.known_at; k < known.log.size() && same && (paid = known.Spend(1)); ++k)
        same = !std::binary_search(r.decided.begin(), r.decided.end(), known.log[k]);
      if (paid && same)
        r.known_at = known.log.size();
      else if (paid && known.Spend(r.facts.symbols.size()))
        guess(r);
      lock.lock();
      continue;
    }
    busy_ = false;
    idle_.notify_all();
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
  }
}

std::vector<std::unique_ptr<elf::ElfInfo>> FactsReader::TakeFiles() {
  std::vector<std::unique_ptr<elf::ElfInfo>> files;
  auto take = [&](const std::shared_ptr<Read>& r) {
    if (r != nullptr && r->info != nullptr) files.push_back(std::move(r->info));
  };
  for (const auto& [path, r] : done_) take(r);
  for (const auto& r : late_) take(r);
  return files;
}

void FactsReader::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return stop_ || (queue_.empty() && !busy_); });
}

RecordedFacts FactsReader::Finish(const std::set<std::string>& paths, int limit_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();  // after the file it is reading, if any
  const long deadline = NowMs() + limit_ms;
  const std::vector<std::string> all(paths.begin(), paths.end());
  std::vector<Read*> reads(all.size(), nullptr);
  std::vector<size_t> todo;  // indexes into all of the paths not read in the background
  for (size_t i = 0; i < all.size(); ++i) {
    auto it = done_.find(all[i]);
    if (it != done_.end()) reads[i] = it->second.get();
    else todo.push_back(i);
  }
  // Read in parallel; what was not begun by the deadline stays unread (no record).
  late_.resize(todo.size());
  text::ParallelFor(todo.size(), 32, [&](size_t k) {
    if (NowMs() > deadline) return;
    const auto l = loaded_.find(all[todo[k]]);
    late_[k] = ReadPath(all[todo[k]], keep_files_, l == loaded_.end() ? nullptr : &l->second);
  });
  for (size_t k = 0; k < todo.size(); ++k) reads[todo[k]] = late_[k].get();
  return MakeRecords(all, reads, todo.empty() ? known_.get() : nullptr);
}

}  // namespace ldscope::analysis
