// Reading what a running process has loaded, without stopping it: its link maps in
// every namespace (glibc's r_debug, found through the process's auxiliary vector and its
// executable's DT_DEBUG, else ld.so's _r_debug symbol; the _r_debug_extended chain for
// dlmopen namespaces), read with process_vm_readv (or /proc/PID/mem), cross-checked
// with /proc/PID/maps. No ptrace attach, no signal, no write: the target runs on.
//
// The target's memory is untrusted input: every pointer read from it is bounded (the
// number of namespaces, of objects, of dynamic entries, of bytes in a string), lists
// are walked with a cycle check, and a list the loader changes while it is read is read
// again (a bounded number of times). docs/ARCHITECTURE.md, "Snapshots of running
// processes".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"
#include "text/result.h"

namespace ldscope::snapshot {

// The bounds on what one process's memory may declare.
inline constexpr size_t kMaxNamespaces = 64;  // glibc has 16 (DL_NNS)
inline constexpr size_t kMaxObjects = 65536;  // per namespace
inline constexpr size_t kMaxDynamic = 1024;   // dynamic entries read per object
inline constexpr size_t kMaxString = 4096;    // bytes of a name, path or NEEDED
inline constexpr size_t kMaxNeeded = 512;     // NEEDED entries kept per object
inline constexpr size_t kMaxPhdrs = 256;
// A read of the link maps is retried while the loader is changing them (r_state other
// than RT_CONSISTENT, or a list that differs when read again), at most this many times
// and for at most kRetryMs in all.
inline constexpr int kMaxTries = 50;
inline constexpr int kRetryMs = 2000;

// One object of a link map, in list order.
struct Object {
  int64_t lmid = 0;  // 0 for the main namespace; others: see Process::numbering
  uint64_t map = 0;  // the link_map's address in the target
  uint64_t l_addr = 0, l_ld = 0;
  std::string name;  // l_name's bytes ("" for the main program)
  std::string path;  // the file: l_name, or /proc/PID/exe's target for the program
  // The mapping that holds the object's dynamic section (/proc/PID/maps): the file
  // really mapped, whatever its name says now.
  uint64_t dev = 0, ino = 0;
  std::string mapped;  // that mapping's path as maps gives it ("" when none)
  // From the dynamic section in memory (what ld.so itself reads).
  std::string soname, rpath, runpath;
  std::vector<std::string> needed;
  uint64_t flags_1 = 0;
  std::string build_id;  // raw bytes of NT_GNU_BUILD_ID, from the mapped headers
  bool is_main = false, is_ldso = false, is_vdso = false;
};

struct Process {
  pid_t pid = 0;     // as given (this pid namespace's)
  pid_t ns_pid = 0;  // as the process sees itself (NSpid's last)
  pid_t ppid = 0;
  uint64_t pid_namespace = 0;
  std::string exe, cwd;
  std::vector<std::string> argv;
  std::vector<std::string> environ;  // NAME=VALUE entries, raw
  uint64_t start_mono_ns = 0;        // when the process started (CLOCK_MONOTONIC, approximate)
  uint64_t read_mono_ns = 0;         // when its link maps were read (the consistent read)
  std::string glibc_version;         // ld.so's banner ("2.36"); "" when not found
  std::string found_via;             // "DT_DEBUG" or "_r_debug"
  int r_version = 0;
  int tries = 0;                   // reads of the link maps until one was consistent
  bool statically_linked = false;  // no dynamic loader: no link map at all
  std::vector<Object> objects;     // namespace by namespace, each in list order
  size_t namespaces = 0;
  std::vector<std::string> notes;  // what the cross-check with /proc/PID/maps found
  uint64_t read_ns = 0;            // how long reading took
};

// Reads pid. An error (one line: the pid, what refused and how to allow it) when the
// process does not exist, cannot be read (permissions: which rule refused), is not a
// process this reader understands (another ELF class), or kept changing its link maps
// through every try.
Result<Process> Read(pid_t pid);

// The process's children's pids (/proc/PID/task/*/children), recursively, pid first.
std::vector<pid_t> Tree(pid_t pid);
// This user's processes running a Python interpreter (the executable's name starts
// with "python"), ldscope itself left out.
std::vector<pid_t> PythonProcesses();

// The trace events of one snapshot: a ProcessStart (START_SNAPSHOT), the Snapshot
// record, and an ObjOpen per object in link-map order, numbered from seq 0. stream is
// Event.stream. LoaderRelevantEnv's rule decides which variables keep their values.
std::vector<v1::Event> ToEvents(const Process& p);

}  // namespace ldscope::snapshot
