// See registry.h.
#include "analysis/registry.h"

#include <algorithm>

#include "analysis/analysis.h"

namespace ldscope::analysis {

const std::vector<RegisteredPass>& Passes() {
  static const std::vector<RegisteredPass> passes = {
      // Symbols no object in scope defines: why a dlopen or import failed.
      {"missing_symbols", {v1::MISSING_SYMBOL}, FindMissingSymbols},
      // NEEDED libraries found nowhere: a program that could not start, a failed dlopen.
      {"missing_library", {v1::MISSING_LIBRARY}, FindMissingLibraries},
      // Import-order effects: NEEDED names satisfied by an earlier object, search order.
      {"shadowing", {v1::SHADOWED_DEPENDENCY, v1::SEARCH_ORDER_SHADOWING}, FindShadowing},
      // Several copies of one library in one process.
      {"duplicates", {v1::DUPLICATE_LIBRARY, v1::DUPLICATE_INFO}, FindDuplicates},
      // A NEEDED that fell through to another installation (a failure, a split family).
      {"fallthrough", {v1::FALL_THROUGH}, FindFallThrough},
      // One runtime (OpenMP, BLAS, libstdc++, CUDA) from several files, across SONAMEs.
      {"runtime_families", {v1::RUNTIME_FAMILY}, FindRuntimeFamilies},
      // Symbols bound to the executable, a preload or an RTLD_GLOBAL dlopen over the own copy.
      {"interposition", {v1::SYMBOL_INTERPOSITION}, FindInterposition},
      // Failed dlopens explained: a plugin rejected, absent, not found because a RUNPATH is
      // not inherited, or failed on a symbol that a loaded object outside its scope defines.
      {"failed_dlopen",
       {v1::DLOPEN_REJECTED, v1::DLOPEN_NOT_FOUND, v1::RUNPATH_NOT_INHERITED, v1::DLOPEN_OUT_OF_SCOPE},
       FindFailedDlopens},
      // Searches that reached files they could not use (a GNU ld script, a noexec mount,
      // another ELF class), ignored preloads, empty path elements (the current directory).
      {"search_files",
       {v1::EMPTY_PATH_ELEMENT, v1::INCOMPATIBLE_LIBRARY, v1::PRELOAD_IGNORED, v1::MAP_FAILED, v1::NOT_A_LIBRARY},
       FindSearchFiles},
      // Objects built for a newer glibc than the machine's (a GLIBC_2.x version node it lacks).
      {"load_checks", {v1::NEEDS_NEWER_GLIBC}, FindNewerGlibc},
      // Initial-exec TLS of late objects against glibc's static TLS surplus, traced and not.
      {"static_tls", {v1::STATIC_TLS_EXHAUSTED}, FindStaticTls},
      // A dlopen glibc 2.41+ refused: the object asks for an executable stack.
      {"execstack", {v1::EXECSTACK_REFUSED}, FindExecStack},
      // The CUDA driver library: a stub, two copies, a compat copy against the kernel driver.
      {"cuda_driver", {v1::CUDA_DRIVER}, FindCudaDriver},
      // Processes of one program (ranks, workers) that disagree about a library's file.
      {"siblings", {v1::SIBLING_MISMATCH}, FindSiblingMismatch},
      // Processes of one program on several hosts that disagree about a library's file.
      {"fleet", {v1::HOST_MISMATCH}, nullptr},
  };
  return passes;
}

std::string PassPhase(const RegisteredPass& p) { return std::string("pass ") + p.name; }

std::vector<v1::FindingKind> ReportedKinds() {
  std::vector<v1::FindingKind> kinds;
  for (const RegisteredPass& p : Passes()) kinds.insert(kinds.end(), p.kinds.begin(), p.kinds.end());
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  return kinds;
}

}  // namespace ldscope::analysis
