// Reads the parts of an ELF shared object that the loader uses, from disk: dynamic
// section, dynamic symbols with binding and version, version definitions and needs,
// build-id. Every read is bounds-checked; a malformed file gives an error, never a
// crash. Files are mapped, not read, so a 1 GB libtorch_cuda.so costs only the pages
// actually looked at.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/result.h"

namespace ldscope::elf {

// The text of an object's symbols (names and version names), in chunks that never
// move: Symbol's views point into it. Shared, so that copies of an ElfInfo stay valid.
class StringArena {
 public:
  std::string_view Add(std::string_view s);
  // Room for n more bytes in one chunk (a new chunk when the current one lacks it).
  void Reserve(size_t n);

 private:
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t used_ = 0, cap_ = 0;
};

// A stable 64-bit hash of a symbol name (as escaped text): the same on every machine
// and in every build, because traces carry it (elf/facts.h) for names they do not keep.
uint64_t NameHash(std::string_view name);

// Names are views into the owning ElfInfo's arena: valid while any copy of it lives.
struct Symbol {
  std::string_view name;  // "" when only the hash is known (facts from a trace)
  uint64_t hash = 0;      // NameHash(name)
  bool defined = false;   // st_shndx != SHN_UNDEF
  bool weak = false;      // STB_WEAK
  bool global = false;    // STB_GLOBAL or STB_GNU_UNIQUE
  bool function = false;  // STT_FUNC or STT_GNU_IFUNC
  bool unique = false;    // STB_GNU_UNIQUE (vague-linkage data, one copy by design)
  bool data = false;      // STT_OBJECT or STT_TLS
  std::string_view version;    // version name, "" when unversioned
  bool hidden = false;    // a non-default version (name@VER rather than name@@VER)
  std::string_view version_file;  // for undefined: the library the version is needed from
};

struct VersionNeed {
  std::string file;
  std::vector<std::string> versions;
};

struct ElfInfo {
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
  uint16_t machine = 0;
  bool is64 = true;
  std::string soname;
  std::vector<std::string> needed;
  std::string rpath, runpath;
  uint64_t flags_1 = 0;
  std::string build_id;   // raw bytes
  std::vector<Symbol> symbols;
  std::shared_ptr<StringArena> strings = std::make_shared<StringArena>();  // symbols' text
  std::vector<std::string> verdefs;  // version names this object defines
  std::vector<VersionNeed> verneeds;
  std::vector<std::string> warnings;  // damaged parts that were skipped
  uint64_t size = 0;      // of the file, and its modification time, when read from disk
  int64_t mtime_ns = 0;
  // Set when these facts come from a trace (elf/facts.h) rather than from the file.
  // Then symbols lists every undefined symbol but, unless defined_complete, only the
  // definitions of names some object of that trace leaves undefined (and marker names):
  // every lookup the analysis makes is for such a name. found holds what the writer
  // found in the file's bytes, by needle (FindString/FindStrings); a needle it did not
  // look for is absent.
  bool from_trace = false;
  bool defined_complete = true;
  std::map<std::string, std::vector<std::string>> found;
};

// Paths given and names returned are escaped text (text/escape.h), as in the model.
// Reads path. An error (naming the file) when it is not a readable ELF shared object
// or executable; the value is never nullptr.
Result<std::unique_ptr<ElfInfo>> ReadElf(const std::string& path);
// The same from memory (for tests and fuzzing).
Result<std::unique_ptr<ElfInfo>> ParseElf(std::string_view data, const std::string& name);

// Every NUL-terminated string in the file that starts with `needle` (at most `limit`).
std::vector<std::string> FindStrings(const std::string& path, std::string_view needle,
                                     size_t max_len = 120, size_t limit = 64);
// Finds `needle` in the file's bytes (mapped); returns the NUL-terminated string that
// starts there, or "". Used for version strings such as "NCCL version 2.28.9+cuda13.0".
std::string FindString(const std::string& path, std::string_view needle, size_t max_len = 80);

}  // namespace ldscope::elf
