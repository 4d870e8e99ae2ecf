// A model of glibc's library search (docs/LOADER.md, glibc dl-load.c _dl_map_object), in
// one place, as libtree writes it down: for a requester and a name, which directories
// are tried in which order and which file is found. It answers "where would this
// requester's own search find NAME?" for the analysis passes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ldscope_proto/timeline.pb.h"
#include "loader/ld_cache.h"

namespace ldscope::loader {

// How a candidate was found: timeline.proto's CandidateStep (render/words.h has the
// words).

struct Object {
  std::string path;      // as loaded (for $ORIGIN)
  std::string rpath;     // DT_RPATH
  std::string runpath;   // DT_RUNPATH
  bool nodeflib = false; // DF_1_NODEFLIB
};

// The e_machine of candidate files by path (0: not a regular 64-bit ELF file): what the
// searches of one analysis learnt, so that each candidate is opened once, not once per
// search that reaches it (libc.so.6's ld.so.cache entry, for every object that needs it).
using MachineCache = std::unordered_map<std::string, uint16_t>;

struct Environment {
  std::vector<std::string> ld_library_path;  // already split
  const LdCache* cache = nullptr;
  // glibc-hwcaps subdirectories the running CPU supports, best first, e.g.
  // "glibc-hwcaps/x86-64-v3"; and (before glibc 2.37) the legacy tls/x86_64 ones.
  std::vector<std::string> subdirs;
  std::vector<std::string> default_dirs;      // the loader's built-in system dirs
  std::string lib = "lib/x86_64-linux-gnu";   // $LIB
  std::string platform = "x86_64";            // $PLATFORM
  // The process's e_machine (its executable's): candidates of another machine are
  // skipped. 0: the machine ldscope runs on.
  uint16_t machine = 0;
  MachineCache* machines = nullptr;  // nullptr: each search reads its candidates
};

// A loadable file the search reached, and the step (and, for RPATH/RUNPATH, the
// object whose dynamic section named the directory) that produced it.
struct Match {
  std::string path;
  v1::CandidateStep step = v1::STEP_DEFAULT_DIRS;
  std::string owner;
};

struct Result {
  std::string path;      // "" when not found
  v1::CandidateStep step = v1::STEP_DEFAULT_DIRS;
  std::vector<std::string> tried;
  std::vector<Match> why;   // parallel to tried: each candidate's step and owner
  // With keep_going: every loadable file after the first, in glibc's order. The loader
  // stops at the first; these are what it never reached.
  std::vector<Match> later;
};

// Names, paths and directories are escaped text (text/escape.h), as in the model; the
// separators and $ORIGIN-style tokens are ASCII, which escaping leaves alone.
// requester: the object whose NEEDED (or dlopen) asks for name. loaders: the chain
// of objects that loaded it, nearest first, ending with the executable (their RPATHs
// apply when the requester has no RUNPATH).
Result Search(const std::string& name, const Object& requester,
              const std::vector<Object>& loaders, const Environment& env,
              bool keep_going = false);

// Splits a path list at any of seps (ld.so takes ':' and ';' in LD_LIBRARY_PATH and
// RPATH, ':' and blanks in LD_PRELOAD); empty elements dropped.
std::vector<std::string> SplitPath(const std::string& list, const char* seps = ":;");
// The glibc-hwcaps (and legacy) subdirectories glibc tried in a trace, in its order,
// learnt from candidate paths under a known directory.
std::vector<std::string> SubdirsFromCandidates(const std::vector<std::string>& candidates,
                                               const std::string& name);

}  // namespace ldscope::loader
