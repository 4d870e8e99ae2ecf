// Which runtime a loaded library belongs to whatever its SONAME (OpenMP, BLAS/LAPACK,
// the C++ runtime, CUDA libraries), read from its name without a wheel's hash suffix and
// from the marker symbols it defines; and which NEEDED names fell through to a copy
// outside the requester's own directories. Shared by the fall-through, runtime-family
// and duplicates passes.
#pragma once

#include <string>
#include <vector>

#include "analysis/context.h"
#include "render/words.h"

namespace ldscope::analysis {

enum class Runtime { kNone, kOpenMP, kBlas, kCxx, kCuda };

struct RuntimeId {
  Runtime runtime = Runtime::kNone;
  // "GNU libgomp", "LLVM libomp", "Intel libiomp5", "OpenBLAS", "MKL", "BLIS",
  // "FlexiBLAS", "reference BLAS", "libstdc++", or a CUDA component ("cuBLAS", "cuDNN").
  std::string implementation;
  bool blas_names = false;  // defines the plain Fortran BLAS names (dgemm_)
};

// From the file name and, when e is given, the symbols it defines.
RuntimeId Classify(const std::string& soname_or_path, const elf::ElfInfo* e);
// A definition Classify looks for by name (the marker symbols): facts written into a
// trace keep these names in full (elf/facts.h).
bool IsMarkerSymbol(std::string_view name);
// The runtime's own version, read from the object as threadpoolctl reports it
// (OpenBLAS's config string, MKL's version string, libstdc++'s highest GLIBCXX_), or
// "unknown".
std::string RuntimeVersion(Context& ctx, const Obj& o, const RuntimeId& id);
// The C library, libm, libstdc++, libgcc_s and the like: one per system, found in the
// system directories by everyone, never a sign of a mixed installation there.
bool IsSystemRuntime(const std::string& soname_or_path);
// A system directory (ld.so.cache's and the default ones).
bool InSystemDir(const std::string& path);
std::string DirName(const std::string& path);

// A NEEDED of an object with RPATH/RUNPATH that none of the requester's own directories
// held, found by LD_LIBRARY_PATH, ld.so.cache or the default directories.
struct FallThrough {
  const Obj* object = nullptr;     // what was bound
  const Obj* requester = nullptr;
  v1::CandidateStep step = v1::STEP_UNKNOWN;  // the step that found it
  std::vector<std::string> own_dirs;  // the requester's own directories, expanded
};
std::vector<FallThrough> FallThroughs(Context& ctx, const ProcessIndex& pi);

}  // namespace ldscope::analysis
