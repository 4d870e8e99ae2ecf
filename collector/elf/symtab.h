// Definitions a shared object keeps out of its dynamic symbol table. The loader sees only
// .dynsym; the full symbol table (.symtab, which stripped files lack) also holds the
// symbols that are local: static functions, and the global ones that hidden visibility
// or a version script's `local:` made local when the object was linked. Read for a few
// names, only when a symbol the loader could not find may be one of them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "text/result.h"

namespace ldscope::elf {

enum class LocalKind {
  // Local in its source file (a static function): listed after its file's STT_FILE entry.
  kFileLocal,
  // Global in its object file, made local by the link: hidden visibility, or a version
  // script's local: pattern. GNU ld lists these after an STT_FILE entry without a name
  // and, in the output, does not mark which of the two it was.
  kLinkLocal,
  // Marked STV_HIDDEN or STV_INTERNAL in .symtab (linkers that keep the visibility).
  kHidden,
};

struct LocalDefinition {
  std::string name;
  LocalKind kind = LocalKind::kLinkLocal;
  std::string source;  // kFileLocal: the source file its STT_FILE entry names
};

struct SymtabLookup {
  bool has_symtab = false;             // false: stripped, nothing is known of its local symbols
  std::vector<LocalDefinition> found;  // in .symtab order, each name at most once
};

// The upper bound on the bytes of .symtab and of its string table that a lookup reads.
inline constexpr uint64_t kMaxSymtabBytes = 256ull << 20;

// Looks names up among the local definitions of path's .symtab. With dev
// and ino not 0, the file must be that one (the one the trace saw), else an error.
Result<SymtabLookup> FindLocalDefinitions(const std::string& path, const std::vector<std::string>& names, dev_t dev = 0,
                                          ino_t ino = 0);

}  // namespace ldscope::elf
