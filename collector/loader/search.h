// A model of glibc's library search (docs/LOADER.md, glibc dl-load.c _dl_map_object), in
// one place, as libtree writes it down: for a requester and a name, which directories
// are tried in which order and which file is found. It answers "where would this
// requester's own search find NAME?" for the analysis passes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "elf/elf_file.h"
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

// Candidate files' first bytes by path (elf::IdentOf): what the searches of one analysis
// learnt, so that each candidate is opened once, not once per search that reaches it
// (libc.so.6's ld.so.cache entry, for every object that needs it).
using IdentCache = std::unordered_map<std::string, elf::Ident>;

// What ld.so's open_verify (dl-load.c) makes of a candidate for a process of a machine.
enum class Verdict : uint8_t {
  kAbsent,        // it does not open: the search goes on
  kUse,           // an object of the process's class and machine: the search ends there
  kOtherClass,    // ELFCLASS32 in a 64-bit process: skipped, the search goes on; when
                  // nothing is found, the error is "wrong ELF class: ELFCLASS32"
  kOtherMachine,  // another e_machine: skipped; when nothing is found, the error is
                  // "cannot open shared object file: No such file or directory"
  kStop,          // not a loadable object (no ELF magic, too short, another byte order,
                  // not ET_DYN/ET_EXEC, unreadable): ld.so fails the whole search there
};
Verdict Judge(const elf::Ident& id, uint16_t machine);
// The error text glibc gives for a kStop candidate ("invalid ELF header", ...).
std::string StopError(const elf::Ident& id);

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
  IdentCache* idents = nullptr;  // nullptr: each search reads its candidates
  // The working directory relative directories are taken in: an empty element of
  // LD_LIBRARY_PATH, RPATH or RUNPATH is the current directory (fillin_rpath in
  // dl-load.c keeps it as a directory of length 0). "": unknown (".").
  std::string cwd;
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
  // Files the search reached and skipped (another ELF class or machine), in order.
  std::vector<Match> skipped;
  // The candidate at which ld.so failed the whole search (Verdict::kStop): path "" when
  // none. Nothing after it is tried, and path stays "".
  Match stopped;
};

// A candidate's identification, through env's cache when it has one.
const elf::Ident& IdentOf(const std::string& path, const Environment& env);

// Names, paths and directories are the bytes the model holds.
// requester: the object whose NEEDED (or dlopen) asks for name. loaders: the chain
// of objects that loaded it, nearest first, ending with the executable (their RPATHs
// apply when the requester has no RUNPATH).
Result Search(const std::string& name, const Object& requester,
              const std::vector<Object>& loaders, const Environment& env,
              bool keep_going = false);

// Splits a path list at any of seps (ld.so takes ':' and ';' in LD_LIBRARY_PATH, ':' in
// RPATH and RUNPATH, ':' and ' ' in LD_PRELOAD); empty elements dropped.
std::vector<std::string> SplitPath(const std::string& list, const char* seps = ":;");
// The same as ld.so splits a search path (fillin_rpath in dl-load.c): empty elements
// kept ("" is the current directory); an empty list has no element at all.
std::vector<std::string> SplitSearchPath(const std::string& list, const char* seps = ":;");
// The positions (0-based) of list's empty elements, as SplitSearchPath splits it.
std::vector<size_t> EmptyElements(const std::string& list, const char* seps = ":;");
// The glibc-hwcaps (and legacy) subdirectories glibc tried in a trace, in its order,
// learnt from candidate paths under a known directory.
std::vector<std::string> SubdirsFromCandidates(const std::vector<std::string>& candidates,
                                               const std::string& name);

}  // namespace ldscope::loader
