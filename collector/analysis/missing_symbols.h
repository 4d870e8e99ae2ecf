// What the missing-symbol pass (missing_symbols.cc) knows of each symbol it reports, and
// why it is missing where that can be told (missing_causes.cc): a C++ name exported with
// the other library ABI or another signature, a Python/C API name the interpreter lacks,
// a definition that exists but is not exported.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/context.h"
#include "analysis/finding_builder.h"
#include "analysis/pip_owner.h"
#include "elf/symtab.h"

namespace ldscope::analysis {

// A definition with the same qualified name as a missing C++ symbol.
struct NearMissDef {
  const Obj* object = nullptr;
  std::string name, demangled;
};

struct Missing {
  std::string name, version, needed_name;  // needed_name: the NEEDED that should provide it
  const Obj* bound = nullptr;
  std::string provider;  // the first file on the requester's path that defines it
  v1::CandidateStep provider_step = v1::STEP_DEFAULT_DIRS;
  // When the provider is not the path's first match: that first match (which lacks it,
  // and where the loader stopped).
  std::string first_match;
  v1::CandidateStep first_step = v1::STEP_DEFAULT_DIRS;
  bool version_only = false;          // "version V not found" (no symbol name)
  const Obj* out_of_scope = nullptr;  // a loaded object that defines it but is not in scope

  // Why it is missing (FindCauses).
  v1::MissingCause cause = v1::MISSING_CAUSE_UNSPECIFIED;
  std::string demangled;          // C++ names
  std::vector<NearMissDef> near;  // CAUSE_CXX_ABI (those first), CAUSE_HOST_VERSION
  // CAUSE_CXX_ABI, CAUSE_HOST_VERSION: the object of the first near-miss;
  // CAUSE_NOT_EXPORTED: the object that holds it; CAUSE_PYTHON_API: the interpreter's.
  const Obj* holder = nullptr;
  // CAUSE_NOT_EXPORTED: a local symbol of holder's .symtab (local_kind, local_source), or
  // only defined with the non-default version hidden_version.
  elf::LocalKind local_kind = elf::LocalKind::kLinkLocal;
  std::string local_source, hidden_version;
  // CAUSE_PYTHON_API: "3.11.2", and where that was read.
  std::string python_version, python_version_from;
};

using Group = std::vector<const Missing*>;  // reported together

// "a, b and c" (at most four, then "and N more").
std::string SymbolList(const Group& ms);

// What FindCauses read from the files of one scope for one file's missing symbols (all
// but the interpreter's part), reused for every object of that file in a scope of the
// same files: a churn loads one failing file a million times, and each search reads every
// definition of the scope.
struct CauseMemo {
  struct Found {
    v1::MissingCause cause = v1::MISSING_CAUSE_UNSPECIFIED;
    size_t holder = 0;  // Missing::holder, as an index into the candidates
    elf::LocalKind local_kind = elf::LocalKind::kLinkLocal;
    std::string local_source, hidden_version;
    struct Near {
      size_t object;  // an index into the candidates
      std::string name, demangled;
    };
    std::vector<Near> near;
  };
  // By the object's file, then the candidates' files; then by name and version.
  std::map<std::vector<const elf::ElfInfo*>, std::map<std::string, Found>> found;
};

// Finds why each of o's missing symbols is missing, looking into scope: the objects of
// its lookup scope (the near-misses are searched in o's NEEDED objects first). Reads
// .symtab of at most a few of them, and only the names missing.
void FindCauses(Context& ctx, const ProcessIndex& pi, const Obj& o, const std::vector<const Obj*>& scope,
                std::vector<Missing>* missing, CauseMemo* memo);

// The text of a finding whose explanation is a group with a cause: what failed and why
// (after "<object> failed to load: "), its labelled evidence, and its fixes.
std::string CauseHeadline(Context& ctx, const Group& g, PipOwners& owners);
void CauseDetails(Context& ctx, const ProcessIndex& pi, const Obj& o, const Group& g, PipOwners& owners,
                  FindingBuilder* f);
void CauseFixes(Context& ctx, const ProcessIndex& pi, const Obj& o, const Group& g, PipOwners& owners,
                FindingBuilder* f);

}  // namespace ldscope::analysis
