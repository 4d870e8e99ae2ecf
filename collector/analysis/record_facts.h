// The ELF facts `run` and `collect` add to a trace after the traced programs ended
// (events.proto's ObjectFacts), so that `report`, `diff` and `imports` give the same
// findings where the files are gone or have changed.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "elf/elf_file.h"
#include "ldscope_proto/events.pb.h"

namespace ldscope::analysis {

struct RecordedFacts {
  std::vector<v1::ObjectFacts> records;
  size_t files = 0;      // paths read
  size_t skipped = 0;    // paths left out when the time limit was reached
};

// One record per file among paths (the files' bytes, as ObjOpen gives them): files with
// a build-id once by build-id, files without one once by device, inode, size and
// modification time; a file that cannot be read gets a record saying why. Definitions
// are kept (by hash) only where some object among paths leaves the name undefined, and
// the runtime-family marker names in full. Stops reading after limit_ms (the rest get
// no record: a report then says they could not be read).
RecordedFacts RecordFacts(const std::set<std::string>& paths, int limit_ms);

// The same records, with each file read as soon as it is known: a background thread
// reads (maps, parses, and searches the bytes of) each path given to Add while the
// traced programs run; Finish reads the paths it has not done yet, on up to 8 threads,
// then makes the records exactly as RecordFacts would (the selection of definitions and
// the deduplication need every file, so they wait for the end). When it has nothing to
// read, the thread also makes each record as it would be if no other file came (and
// makes it again when a file read later leaves undefined a name it defines); Finish
// keeps those whose choice of definitions the other files did not change.
//
// Finish's limit_ms bounds the reading done in Finish (the paths the background thread
// had not read by then): a file read in the background always gets its record. A path
// Add never saw is read by Finish.
//
// A file read in the background and changed before Finish (rewritten, replaced or
// deleted): its record describes the file as it was read, shortly after the program
// mapped it, which is the file the program loaded (RecordFacts alone, or a path read in
// Finish, describes the file as it is at the end). A file that is not the one the program
// loaded when it is read (Add's Loaded: another build-id, or, without one, another device
// or inode) has no facts taken: its record is unreadable, saying that it changed before
// its facts were taken, with the loaded build-id (Files then reads no other file of that
// build-id for it either).
class FactsReader {
 public:
  FactsReader();
  ~FactsReader();  // stops and joins the background thread
  FactsReader(const FactsReader&) = delete;
  FactsReader& operator=(const FactsReader&) = delete;

  // Before the first Add: keep each file read (mapped) for TakeFiles, for a report made
  // right after (`run`).
  void KeepFiles() { keep_files_ = true; }
  // What the program loaded at a path: its ObjOpen's device, inode and build-id (raw;
  // 0 and empty: not known).
  struct Loaded {
    uint64_t dev = 0, ino = 0;
    std::string build_id;
  };
  // Queues path for the background thread (started by the first call). Never waits for
  // the reading: the caller (the collector's event loop) holds the lock only to append.
  void Add(const std::string& path, const Loaded& loaded);
  void Add(const std::string& path) { Add(path, Loaded()); }
  // The records of paths (see RecordFacts). Stops the background thread first: it ends
  // the file it is reading, and what is still queued is read here. Call once.
  RecordedFacts Finish(const std::set<std::string>& paths, int limit_ms);
  // After Finish, with KeepFiles: the files read (those that could be), as ReadElf gives
  // them, each with its undefined symbols indexed.
  std::vector<std::unique_ptr<elf::ElfInfo>> TakeFiles();
  // For tests: waits until the background thread has read every path added so far (and
  // made its guesses of their records).
  void WaitIdle();

  struct Read;  // one path's reading (record_facts.cc)
  struct Known;  // what the background thread knows of all it read (record_facts.cc)

 private:
  void Work();

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::string> queue_;  // added, not yet taken by the thread
  std::map<std::string, Loaded> loaded_;  // by path, from Add
  bool stop_ = false;
  bool keep_files_ = false;
  bool no_thread_ = false;          // the thread could not be started
  bool busy_ = false;               // the thread is reading a path it took
  std::thread thread_;
  // Paths read by the thread (written by it, read by Finish after the join).
  std::map<std::string, std::shared_ptr<Read>> done_;  // (shared_ptr: Read is incomplete here)
  std::vector<std::shared_ptr<Read>> late_;  // read by Finish
  std::unique_ptr<Known> known_;  // the thread's, then Finish's
};

}  // namespace ldscope::analysis
