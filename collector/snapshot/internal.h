// What the snapshot layer's files share (not for other layers).
#pragma once

#include <cstdint>
#include <vector>

#include "snapshot/memory.h"
#include "snapshot/snapshot.h"

namespace ldscope::snapshot {

// The entries of the target's auxiliary vector the reader uses.
struct Auxv {
  uint64_t phdr = 0, phnum = 0, base = 0, sysinfo_ehdr = 0, entry = 0;
};

// Reads every namespace's list from r_debug (retrying while the loader changes them, see
// kMaxTries), then each object's file, dynamic facts and build-id, into p.
Status ReadLinkMaps(Memory& mem, const std::vector<Mapping>& maps, const Auxv& aux, uint64_t r_debug, Process* p);

}  // namespace ldscope::snapshot
