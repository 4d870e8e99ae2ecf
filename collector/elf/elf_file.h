// Reads the parts of an ELF shared object that the loader uses, from disk: dynamic
// section, version definitions and needs, build-id, and views of the dynamic symbol
// table, its string table, .gnu.version and the symbol hash table. Every read is
// bounds-checked; a malformed file gives an error, never a crash. Files are mapped and
// stay mapped while their ElfInfo lives, so a 1 GB libtorch_cuda.so costs only the
// pages actually looked at: symbols are never copied out, a definition is looked up
// through the object's own DT_GNU_HASH table (DT_HASH, or a scan where it has neither),
// as ld.so's do_lookup does.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/result.h"

namespace ldscope::elf {

// A stable 64-bit hash of a symbol name's bytes: the same on every machine
// and in every build, because traces carry it (elf/facts.h) for names they do not keep.
uint64_t NameHash(std::string_view name);

// One dynamic symbol (never a local one, never one without a name). Names and versions
// are bytes, views into the mapped file or into the ElfInfo: valid while it lives.
struct Symbol {
  std::string_view name;  // "" when only the hash is known (facts from a trace)
  uint64_t hash = 0;      // NameHash(name), set only when name is "" (see HashOf)
  bool defined = false;   // st_shndx != SHN_UNDEF
  bool weak = false;      // STB_WEAK
  bool unique = false;    // STB_GNU_UNIQUE (vague-linkage data, one copy by design)
  bool data = false;      // STT_OBJECT or STT_TLS
  std::string_view version;    // version name, "" when unversioned
  bool hidden = false;    // a non-default version (name@VER rather than name@@VER)
  std::string_view version_file;  // for undefined: the library the version is needed from
};

inline uint64_t HashOf(const Symbol& s) { return s.name.empty() ? s.hash : NameHash(s.name); }

// A name to look up, with its hashes computed once for all the objects it is looked up
// in (GNU's for files, NameHash for facts from a trace).
class SymbolQuery {
 public:
  // version "" for an unversioned reference.
  SymbolQuery(std::string_view name, std::string_view version);
  // The same with GNU's hash of the name's bytes already known.
  SymbolQuery(std::string_view name, std::string_view version, uint32_t gnu_hash);
  std::string_view name() const { return name_; }
  std::string_view version() const { return version_; }
  uint32_t gnu_hash() const { return gnu_; }
  uint32_t sysv_hash() const;
  uint64_t name_hash() const;

 private:
  std::string_view name_, version_;
  uint32_t gnu_ = 0;
  mutable uint32_t sysv_ = 0;
  mutable uint64_t fnv_ = 0;
  mutable bool have_sysv_ = false, have_fnv_ = false;
};

// What looking one name up in one object found.
struct Lookup {
  bool named = false;    // some definition carries the name, whatever its version
  // One of them satisfies the reference by glibc's rule: a versioned reference matches
  // that version, or any definition in an object without version definitions; an
  // unversioned one matches a default (non-hidden) definition.
  bool matches = false;
  Symbol first;          // the first definition of the name in .dynsym order (if named)
};

struct VersionNeed {
  std::string file;
  std::vector<std::string> versions;
};

class ElfInfo {
 public:
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
  uint16_t machine = 0;
  std::string soname;
  std::vector<std::string> needed;
  std::string rpath, runpath;
  uint64_t flags_1 = 0;
  uint64_t dt_flags = 0;  // DT_FLAGS (DF_STATIC_TLS: initial-exec TLS)
  // PT_TLS: the thread-local block's size (p_memsz; 0: none), its alignment, and the
  // offset of its first byte within that alignment (p_vaddr % p_align), which ld.so lays
  // the static TLS block out with.
  uint64_t tls_size = 0, tls_align = 0, tls_first_byte = 0;
  // PT_GNU_STACK's p_flags (PF_X: the object asks for an executable stack); gnu_stack
  // false when it has no such header, which glibc takes as PF_X on x86-64 and aarch64.
  bool gnu_stack = false;
  uint32_t stack_flags = 0;
  std::string build_id;   // raw bytes
  std::vector<std::string> verdefs;  // version names this object defines
  std::vector<VersionNeed> verneeds;
  uint64_t size = 0;      // of the file, and its modification time, when read from disk
  int64_t mtime_ns = 0;
  // Set when these facts come from a trace (elf/facts.h) rather than from the file.
  // Then the symbols are every undefined symbol but, unless defined_complete, only the
  // definitions of names some object of that trace leaves undefined (and marker names):
  // every lookup the analysis makes is for such a name. found holds what the writer
  // found in the file's bytes, by needle (FindString/FindStrings); a needle it did not
  // look for is absent.
  bool from_trace = false;
  bool defined_complete = true;
  std::map<std::string, std::vector<std::string>> found;

  // The definitions of q's name in this object (by hash only for facts from a trace).
  Lookup Find(const SymbolQuery& q) const;
  bool Defines(const SymbolQuery& q) const { return Find(q).matches; }
  bool Defines(std::string_view name, std::string_view version) const {
    return Defines(SymbolQuery(name, version));
  }
  bool DefinesVersion(std::string_view version) const;

  // Building one from a trace's facts (elf/facts.cc): text kept with the object, and
  // its symbols (from_trace must be set), whose definitions this indexes by hash.
  std::string_view Keep(std::string s);
  void SetTraceSymbols(std::vector<Symbol> symbols);

  enum class Which { kUndefined, kDefined, kAll };
  // Calls f(const Symbol&) for each symbol of that kind, in .dynsym order. Undefined
  // symbols' names are read; a definition's name only when f asks for definitions.
  template <typename F>
  void ForEachSymbol(Which w, F&& f) const {
    Symbol s;
    for (size_t i = 0, n = SymbolSlots(); i < n; ++i)
      if (SymbolAt(i, w, &s)) f(s);
  }
  // Calls f(const Symbol&, const SymbolQuery&) for each undefined symbol, with the query
  // that looks it up elsewhere. The first call notes the undefined symbols' indexes,
  // their names' sizes and GNU hashes (12 bytes each), so later passes skip the
  // definitions, the hashing and the search for each name's end.
  template <typename F>
  void ForEachUndefined(F&& f) const {
    if (from_trace) {
      ForEachSymbol(Which::kUndefined, [&](const Symbol& s) { f(s, SymbolQuery(s.name, s.version)); });
      return;
    }
    IndexUndefined();
    Symbol s;
    for (const UndefinedRef& r : undefined_) {
      UndefinedAt(r, &s);
      f(s, SymbolQuery(s.name, s.version, r.gnu_hash));
    }
  }
  // What the first ForEachUndefined notes, now (a file read ahead on another thread:
  // text/parallel.h). Not for facts from a trace.
  void IndexUndefined() const {
    if (!undefined_indexed_) NoteUndefined();
  }
  // The same as a list (for loops that stop early; the hot ones use ForEachSymbol).
  std::vector<Symbol> Symbols(Which w) const {
    std::vector<Symbol> out;
    ForEachSymbol(w, [&](const Symbol& s) { out.push_back(s); });
    return out;
  }

 private:
  friend class Parser;

  size_t SymbolSlots() const { return from_trace ? facts_.size() : nsyms_; }
  bool SymbolAt(size_t i, Which w, Symbol* out) const;
  void NoteUndefined() const;
  struct UndefinedRef;
  void UndefinedAt(const UndefinedRef& r, Symbol* out) const;
  // The symbol table's string at off; false when out of range.
  bool NameAt(uint32_t off, std::string_view* out) const;
  bool RawNameIs(uint32_t off, std::string_view raw) const;
  // Fills the version fields of a symbol from .gnu.version entry i.
  void VersionOf(size_t i, Symbol* s) const;
  // Adds the definition at .dynsym index i to l when it carries q's name.
  void Consider(size_t i, const SymbolQuery& q, Lookup* l, size_t* first) const;

  // The file, mapped (or the bytes ParseElf was given), kept while views point into it.
  std::shared_ptr<const void> bytes_;
  std::string_view dynsym_, dynstr_, versym_;
  size_t nsyms_ = 0;
  // DT_GNU_HASH (the ELF64 layout): bloom words, buckets, chain values.
  std::string_view gnu_bloom_, gnu_buckets_, gnu_chain_;
  uint32_t gnu_nbuckets_ = 0, gnu_symoffset_ = 0, gnu_shift_ = 0;
  // DT_HASH.
  std::string_view sysv_buckets_, sysv_chain_;
  uint32_t sysv_nbucket_ = 0, sysv_nchain_ = 0;
  // .gnu.version index -> (version name, file it is needed from).
  std::vector<std::pair<std::string_view, std::string_view>> versions_;
  std::deque<std::string> text_;  // strings the views above point into
  struct UndefinedRef {
    uint32_t index, gnu_hash;
    uint32_t name_size;  // of the name's bytes
  };
  mutable std::vector<UndefinedRef> undefined_;  // filled by IndexUndefined
  mutable bool undefined_indexed_ = false;
  // Facts from a trace: the symbols, and (NameHash, index) of the definitions, sorted.
  std::vector<Symbol> facts_;
  std::vector<std::pair<uint64_t, uint32_t>> facts_defs_;
};

// Paths given and names returned are bytes, as in the model; errors are text.
// Reads path. An error (naming the file) when it is not a readable ELF shared object
// or executable; the value is never nullptr.
Result<std::unique_ptr<ElfInfo>> ReadElf(const std::string& path);
// The same from memory (for tests and fuzzing); the bytes are copied.
Result<std::unique_ptr<ElfInfo>> ParseElf(std::string_view data, const std::string& name);

// The machine ld.so itself is built for (EM_X86_64, EM_AARCH64): objects of another
// e_machine are skipped by its search.
uint16_t HostMachine();
// The e_machine of the 64-bit ELF file at path, 0 when it is not one.
uint16_t MachineOf(const std::string& path);

// A file's first bytes, as ld.so's open_verify (dl-load.c) reads a candidate of its
// search: whether it opened, and the ELF identification and header fields it checks.
struct Ident {
  enum class Kind : uint8_t {
    kAbsent,      // open failed (ENOENT, EACCES, ENOTDIR: the search goes on)
    kUnreadable,  // opened, but its first bytes could not be read (a directory)
    kShort,       // fewer bytes than a 64-bit ELF header ("file too short")
    kNotElf,      // no ELF magic ("invalid ELF header"): a text file, a GNU ld script
    kElf,
  };
  Kind kind = Kind::kAbsent;
  uint8_t elf_class = 0;  // EI_CLASS: ELFCLASS32, ELFCLASS64
  uint8_t data = 0;       // EI_DATA: ELFDATA2LSB, ELFDATA2MSB
  uint16_t type = 0;      // e_type (ET_DYN ...), as the file's byte order writes it
  uint16_t machine = 0;   // e_machine
  // kNotElf, kShort: the file's first bytes (up to 4 KiB, raw), for a GNU ld script's
  // commands.
  std::string head;
  bool operator==(const Ident&) const = default;
};
Ident IdentOf(const std::string& path);
// "ELFCLASS32", "x86-64", "AArch64": the words for an Ident's class and machine.
std::string ClassWord(uint8_t elf_class);
std::string MachineWord(uint16_t machine);

// Every NUL-terminated string in the file that starts with `needle` (at most `limit`).
std::vector<std::string> FindStrings(const std::string& path, std::string_view needle,
                                     size_t max_len = 120, size_t limit = 64);
// Finds `needle` in the file's bytes (mapped); returns the NUL-terminated string that
// starts there, or "". Used for version strings such as "NCCL version 2.28.9+cuda13.0".
std::string FindString(const std::string& path, std::string_view needle, size_t max_len = 80);

}  // namespace ldscope::elf
