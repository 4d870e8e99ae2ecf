// The ELF facts `run` and `collect` add to a trace after the traced programs ended
// (events.proto's ObjectFacts), so that `report`, `diff` and `imports` give the same
// findings where the files are gone or have changed.
#pragma once

#include <set>
#include <string>
#include <vector>

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
// no record: a report then says they could not be read, as before).
RecordedFacts RecordFacts(const std::set<std::string>& paths, int limit_ms);

}  // namespace ldscope::analysis
