// ELF facts carried in a trace (events.proto's ObjectFacts): the record `run` and
// `collect` write for each loaded object file, and the ElfInfo a reader makes of it, so
// that the analysis reads the same facts whether they come from the file or from the
// trace. The facts of one file are self-contained: a reader may cache them by build-id
// across traces (the definitions a record keeps are a subset of the file's, so records
// of one build-id from several traces may be merged by union).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "elf/elf_file.h"
#include "ldscope_proto/events.pb.h"

namespace ldscope::elf {

// How a definition is recorded: dropped (no lookup will ask for it), by hash, or with
// its name in full.
enum class Keep { kDrop, kHash, kName };

// The record of e. keep decides for each definition; undefined symbols always keep their
// names. found: what was searched for in the file's bytes (needle -> strings found, as
// FindString returns them).
v1::ObjectFacts ToFacts(const ElfInfo& e, const std::function<Keep(const Symbol&)>& keep,
                        const std::map<std::string, std::vector<std::string>>& found);
// ToFacts in two steps, for a writer that reads each file before it knows which
// definitions to keep (analysis/record_facts.cc reads files while the traced programs
// run; which names some object leaves undefined is known only at the end).
// PrepareFacts reads e once: everything the record holds but the choice of definitions,
// with each symbol's flags, version and name hash; named(s) says which definitions are
// kept with their name in full (undefined symbols always are). The result holds
// nothing of e. FinishFacts then makes exactly the record ToFacts(e, keep, found) makes, where
// keep gives kName for those named definitions and, for every other definition,
// kHash when keep_hash(HashOf(s)) and kDrop otherwise (keep_hash is called once for each
// of those, in .dynsym order: the symbols without kNamed whose defined is set).
struct PreparedFacts {
  static constexpr uint8_t kNamed = 128;  // the flag of a symbol recorded by name
  v1::ObjectFacts record;  // all but symbols_zlib and symbols_size
  struct Sym {
    uint64_t hash;     // HashOf (0 for a named symbol)
    uint32_t version;  // 1 + index into versions, 0: unversioned
    uint8_t flags;     // as the record's (kNamed: its name is the next of names)
    bool defined;
  };
  std::vector<Sym> symbols;          // in .dynsym order
  std::string names;                 // the named symbols' names (the file's bytes), one after the other
  std::vector<uint32_t> name_ends;   // where each ends in names
  std::vector<std::pair<std::string, std::string>> versions;  // (name, file), the file's bytes
  std::vector<uint64_t> undefined;   // HashOf of each undefined symbol, in order
};
PreparedFacts PrepareFacts(const ElfInfo& e, const std::function<bool(const Symbol&)>& named,
                           const std::map<std::string, std::vector<std::string>>& found);
v1::ObjectFacts FinishFacts(const PreparedFacts& p, const std::function<bool(uint64_t)>& keep_hash);
// The record of a file that could not be read.
v1::ObjectFacts UnreadableFacts(const std::string& path, const std::string& error);

// An ElfInfo from a record (from_trace set; names as ReadElf gives them); an error when the record says the file was
// unreadable or its symbols cannot be decoded.
Result<std::unique_ptr<ElfInfo>> FromFacts(const v1::ObjectFacts& f, const std::string& path);

// One record as a trace holds it: its bytes, kept as they are, and the few fields a
// lookup checks (decoded when the record is read). The whole record (most of it the
// symbols, the needed names, the strings found) is decoded only when a file must be made
// of it (Decode): a file missing or changed on the reading machine.
struct FactsRecord {
  std::string bytes;               // the ObjectFacts message
  std::vector<std::string> paths;  // raw bytes, as recorded
  std::string build_id;            // raw
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string unreadable;
  uint32_t machine = 0;            // e_machine
  // The whole record; false when its bytes do not parse.
  bool Decode(v1::ObjectFacts* out) const;
};
// The fields above from an ObjectFacts message's bytes (moved into out->bytes); false
// when the bytes are not a well-formed message at their top level or unreadable is not
// UTF-8. The nested messages are checked only when the record is decoded.
bool ScanFacts(std::string bytes, FactsRecord* out);

// The records of one or more traces, by path (as in the model) and by
// build-id. Later records of a path replace earlier ones.
class TraceFacts {
 public:
  void Add(const v1::ObjectFacts& f);
  // A record's bytes (a trace's); false (and nothing added) when ScanFacts refuses them.
  bool Add(std::string bytes);
  const FactsRecord* ForPath(const std::string& path) const;
  const FactsRecord* ForBuildId(const std::string& raw_build_id) const;
  size_t size() const { return records_.size(); }
  bool empty() const { return records_.empty(); }

 private:
  std::vector<std::unique_ptr<FactsRecord>> records_;
  std::unordered_map<std::string, const FactsRecord*> by_path_, by_build_id_;
};

}  // namespace ldscope::elf
