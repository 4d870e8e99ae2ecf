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

// The record of e (names unescaped back to the file's bytes). keep decides for each
// definition; undefined symbols always keep their names. found: what was searched for
// in the file's bytes (needle -> strings found, escaped text as FindString returns it).
v1::ObjectFacts ToFacts(const ElfInfo& e, const std::function<Keep(const Symbol&)>& keep,
                        const std::map<std::string, std::vector<std::string>>& found);
// The record of a file that could not be read.
v1::ObjectFacts UnreadableFacts(const std::string& path, const std::string& error);

// An ElfInfo from a record (from_trace set; names as escaped text, as ReadElf gives
// them); an error when the record says the file was unreadable or its symbols cannot be
// decoded.
Result<std::unique_ptr<ElfInfo>> FromFacts(const v1::ObjectFacts& f, const std::string& path);

// The records of one or more traces, by path (escaped text, as in the model) and by
// build-id. Later records of a path replace earlier ones.
class TraceFacts {
 public:
  void Add(v1::ObjectFacts f);
  const v1::ObjectFacts* ForPath(const std::string& path) const;
  const v1::ObjectFacts* ForBuildId(const std::string& raw_build_id) const;
  size_t size() const { return records_.size(); }
  bool empty() const { return records_.empty(); }

 private:
  std::vector<std::unique_ptr<v1::ObjectFacts>> records_;
  std::unordered_map<std::string, const v1::ObjectFacts*> by_path_, by_build_id_;
};

}  // namespace ldscope::elf
