// The analysis passes, one per finding kind, each in its own file, and the driver
// that runs them in order. No pass prints anything.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>

#include "analysis/context.h"
#include "analysis/finding_builder.h"
#include "store/trace_file.h"
#include "ldscope_proto/report.pb.h"

namespace ldscope::analysis {

// Same SONAME, different files, alive together (DUPLICATE_LIBRARY); same family under
// other sonames or in other namespaces (DUPLICATE_INFO). duplicates.cc
void FindDuplicates(Context& ctx, v1::Report* out);
// NEEDED satisfied by an earlier object although the requester's own search would find
// another file; LD_LIBRARY_PATH winning over the requester's RUNPATH. shadowing.cc
void FindShadowing(Context& ctx, v1::Report* out);
// Undefined symbols and versions no object in scope defines, with the file that would
// define them. missing_symbols.cc
void FindMissingSymbols(Context& ctx, v1::Report* out);
// NEEDED names that fell through from the requester's RPATH/RUNPATH to another
// installation, when a failure followed or a family got split. fallthrough.cc
void FindFallThrough(Context& ctx, v1::Report* out);
// OpenMP, BLAS, C++ runtime and CUDA libraries from several files or implementations,
// whatever their SONAMEs. runtime_families.cc
void FindRuntimeFamilies(Context& ctx, v1::Report* out);
// Symbols an object's own closure defines, bound to the executable, an LD_PRELOAD or an
// RTLD_GLOBAL dlopen instead. interposition.cc
void FindInterposition(Context& ctx, v1::Report* out);
// The CUDA driver library (libcuda.so*): a toolkit's stub loaded at run time, two copies,
// a cuda-compat copy against a kernel driver of another version. cuda_driver.cc
void FindCudaDriver(Context& ctx, v1::Report* out);
// Processes running one program (torchrun ranks, pytest-xdist workers) that bound
// different files for one SONAME: the odd ones out against the others. siblings.cc
void FindSiblingMismatch(Context& ctx, v1::Report* out);

// A NEEDED library found nowhere: the program could not start (error), or a dlopen
// failed (info). missing_library.cc
void FindMissingLibraries(Context& ctx, v1::Report* out);
// The process stopped at start-up because a NEEDED library was found nowhere: nothing
// of it ran, so nothing was called lazily either.
bool StartupFailed(const ProcessIndex& pi);

// The version nodes (verneed) an object needs of the libraries its NEEDED names were
// bound to and that those lack: ld.so checks them as it loads the object, whatever the
// binding mode, and fails the load ("version `V' not found"). unknown is set when a file
// could not be read. load_checks.cc
struct UnmetVersion {
  const Obj* bound;     // what the NEEDED name was bound to
  std::string file;     // the NEEDED name (verneed's file)
  std::string version;  // the node
};
std::vector<UnmetVersion> UnmetVersions(Context& ctx, const ProcessIndex& pi, const Obj& o, bool* unknown);
// The start-up object (in load order) whose version needs stopped the program before
// main, with what it lacks; nullptr when the process started (or exited normally).
const Obj* StartupVersionFailure(Context& ctx, const ProcessIndex& pi, std::vector<UnmetVersion>* unmet);
// A GLIBC_2.x node of one of glibc's own libraries.
bool IsGlibcVersionNeed(const std::string& needed_name, const std::string& version);
// Objects built for a newer glibc than the machine's: a version node of glibc that the
// loaded glibc lacks stopped the program's start-up (error) or a dlopen (error when the
// Python import it was for failed, else warning). load_checks.cc
void FindNewerGlibc(Context& ctx, v1::Report* out);
// Objects with initial-exec TLS loaded after start-up that do not fit glibc's static TLS
// surplus (error), or fit only because ldscope's audit module enlarged it (warning).
// static_tls.cc
void FindStaticTls(Context& ctx, v1::Report* out);
// A dlopen glibc 2.41 or later refused because the object asks for an executable stack
// (PT_GNU_STACK with PF_X, or none). execstack.cc
void FindExecStack(Context& ctx, v1::Report* out);

// Failed dlopens explained: a plugin rejected because a library it needs lacks a version
// or symbol (warning), a name found nowhere (info), a name only a RUNPATH of the
// caller's loader holds (warning: RUNPATH is not inherited), an undefined symbol that
// a loaded object outside the lookup scope defines (error). failed_dlopen.cc
void FindFailedDlopens(Context& ctx, v1::Report* out);
// Searches explained by the files they reached: a file that is not a library (a GNU ld
// script), one that could not be mapped (a noexec mount), only copies of another ELF
// class or machine; LD_PRELOAD entries ld.so ignored; empty elements of LD_LIBRARY_PATH,
// RPATH and RUNPATH (the current directory). search_files.cc
void FindSearchFiles(Context& ctx, v1::Report* out);
// Whether FindSearchFiles explains a search that mapped nothing (by a file it reached:
// then it is no "not found").
bool ExplainedBySearchFiles(const Context& ctx, const ProcessIndex& pi, const v1::SearchResult& s);

// The search behind a failed request of name by requester, as labelled lines: one
// "tried" line per directory (hwcaps subdirectories folded in), LD_LIBRARY_PATH, the
// loaders' RUNPATHs that were not searched, ld.so.cache. missing_library.cc
void AddSearchDetails(Context& ctx, const ProcessIndex& pi, const Obj& requester, const std::string& name,
                      const v1::SearchResult* s, bool dlopen, FindingBuilder* f);

// A file the loader's own rules put out of a search's reach: the requester's -z
// nodefaultlib (the default directories and their ld.so.cache entries skipped), or an
// $ORIGIN taken from the directory of a symbolic link its owner was opened through
// (docs/LOADER.md sections 2 and 13). missing_library.cc
struct Reach {
  enum Kind { kNone, kNodeflib, kOriginLink } kind = kNone;
  std::string found;                          // where the file is
  std::string owner;                          // kOriginLink: the object with $ORIGIN, as opened
  std::string real_owner;                     // its real path
  v1::CandidateStep step = v1::STEP_UNKNOWN;  // the step that would find it
};
Reach WhyOutOfReach(Context& ctx, const ProcessIndex& pi, const Obj& requester, const std::string& name);

// Runs every pass over the context's timeline; findings ordered by process, then
// severity. One Context serves every pass and whatever else reads the same trace (the
// diff's library comparison, a host's fleet summary): ld.so.cache and each ELF file are
// read once per trace.
v1::Report Analyze(Context& ctx);
// The same over a context of its own.
// facts: the ELF facts the traces recorded (FactsOf), for files gone or changed.
v1::Report Analyze(const v1::Timeline& timeline, const elf::TraceFacts* facts = nullptr);
// The same with a file cache shared across timelines; `also` (if set) is called with the
// context once the passes have run (`report` over many hosts summarises each host).
v1::Report Analyze(const v1::Timeline& timeline, const elf::TraceFacts* facts, Files* files,
                   const std::function<void(Context&)>& also);
// The ELF facts (events.proto's ObjectFacts) of every file of a trace set.
elf::TraceFacts FactsOf(const store::TraceSet& traces);

// The note naming the object files the cache could not read ("" when none).
std::string UnreadableFilesNote(const Files& files);
// The same from path -> error.
std::string UnreadableFilesNote(const std::map<std::string, std::string>& errors);

// A process's environment variable as recorded ("" when not set or not recorded).
std::string EnvOf(const v1::ProcessTimeline& p, const std::string& var);
// Whether a loaded object takes part in comparing library sets (siblings.cc, fleet.cc): a
// named library of the main namespace, not rolled back, not the executable or the vDSO.
bool CountsAsLibrary(const Obj& o);

// "libnccl.so.2.16.2 (NCCL 2.16.2+cuda11.8)"-style label for a Library.
std::string Label(const v1::Library& l);

}  // namespace ldscope::analysis
