// Encoders for each ldscope.v1.Event body, shared by the audit library's hooks and
// the conformance test that parses their output with libprotobuf. Inputs are plain
// C data; nothing here allocates or calls into libc beyond strlen/memcpy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire.h"

namespace ldscope::audit {

// Longest string field we send; longer ones are cut and the event marked truncated.
constexpr size_t kMaxString = 4096;
constexpr size_t kMaxNeeded = 256;
constexpr size_t kMaxBuildId = 64;

// Field numbers of ldscope.v1.Event, its bodies and TraceHeader (proto/events.proto).
// The audit library cannot include libprotobuf's generated headers: each is
// static_assert'ed equal to the generated k...FieldNumber in
// tests/audit/field_numbers.cc, so a schema change that is not made here too fails
// the build.
namespace field {
enum Event : uint32_t {
  kPid = 1, kTid = 2, kSeq = 3, kMonoNs = 4, kDropped = 5, kTruncated = 6, kOffsetNs = 8,
  kProcessStart = 10, kSearch = 11, kObjOpen = 12, kObjClose = 13,
  kActivity = 14, kPreinit = 15, kExit = 16,
};
namespace trace_header {
enum : uint32_t {
  kFormatVersion = 1, kHost = 2, kGlibcVersion = 3, kStartUnixNs = 4, kWriter = 5,
  kPidNamespace = 10,
};
}  // namespace trace_header
namespace process_start {
enum : uint32_t {
  kReason = 1, kPpid = 2, kExe = 3, kArgv = 4, kCwd = 5, kGlibcVersion = 6, kEnv = 7,
  kImageStartNs = 8, kParentPid = 9, kParentImageStartNs = 10, kParentSeqAtFork = 11,
  kLavVersion = 12, kSecure = 13, kPidNamespace = 20,
};
enum : uint32_t { kNotTraced = 21, kFdLimit = 22 };
}  // namespace process_start
namespace env_var {
enum : uint32_t { kName = 1, kValue = 2, kRedacted = 3 };
}  // namespace env_var
namespace search {
enum : uint32_t {
  kName = 1, kCandidate = 2, kFlag = 3, kRequester = 4, kDirRef = 5, kDir = 6, kBase = 7,
};
}  // namespace search
namespace obj_open {
enum : uint32_t {
  kId = 1, kPath = 2, kLmid = 3, kBase = 4, kDev = 5, kIno = 6, kSoname = 7, kNeeded = 8,
  kRpath = 9, kRunpath = 10, kBuildId = 11, kFlags1 = 12, kIsMain = 13, kIsVdso = 14,
  kIsLdso = 15, kCwd = 16,
};
}  // namespace obj_open
namespace obj_close {
enum : uint32_t { kId = 1, kUnrelocated = 2 };
}  // namespace obj_close
namespace activity {
enum : uint32_t { kKind = 1, kId = 2 };
}  // namespace activity
namespace event_batch {
enum : uint32_t { kEvent = 1 };
}  // namespace event_batch
}  // namespace field

struct EventHead {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t seq = 0;
  uint64_t mono_ns = 0;
  uint64_t image_start_ns = 0;  // when set, the event carries mono_ns as an offset from it
  uint64_t dropped = 0;
};

// One search candidate. Either candidate (the whole path) or dir_ref (an interned
// directory, with dir when this event defines it) plus base (when the file name is not
// the search's name).
struct SearchInfo {
  const char* name = nullptr;
  const char* candidate = nullptr;
  uint32_t dir_ref = 0;
  const char* dir = nullptr;
  size_t dir_len = 0;
  const char* base = nullptr;
  uint32_t flag = 0;
  uint64_t requester = 0;
};

struct ProcessStartInfo {
  uint32_t reason = 0;               // StartReason
  int32_t ppid = 0;
  const char* exe = nullptr;
  const char* cmdline = nullptr;     // NUL-separated, as /proc/self/cmdline
  size_t cmdline_len = 0;
  bool cmdline_truncated = false;    // the command line did not fit the buffer
  const char* cwd = nullptr;
  const char* glibc_version = nullptr;
  char* const* environ = nullptr;    // NULL-terminated
  uint64_t image_start_ns = 0;
  int32_t parent_pid = 0;
  uint64_t parent_image_start_ns = 0;
  uint64_t parent_seq_at_fork = 0;
  uint32_t lav_version = 0;
  bool secure = false;
  uint64_t pid_namespace = 0;        // inode of /proc/self/ns/pid
  bool cut = false;                  // exe, cmdline or cwd did not fit its buffer
  bool keep_argv = false;            // LDSCOPE_KEEP_ARGV=1: secrets not left out (redact.h)
  uint32_t not_traced = 0;           // NotTraced: nothing follows this event
  uint64_t fd_limit = 0;             // RLIMIT_NOFILE, with NOT_TRACED_DESCRIPTOR_LIMIT
};

struct ObjectInfo {
  uint64_t id = 0;
  const char* path = nullptr;
  int64_t lmid = 0;
  uint64_t base = 0;
  uint64_t dev = 0;
  uint64_t ino = 0;
  const char* soname = nullptr;
  // Only the first n_needed are set (left uninitialized: zeroing 2 KiB per object
  // would cost more than reading the object).
  const char* needed[kMaxNeeded];
  size_t n_needed = 0;
  bool needed_truncated = false;
  const char* rpath = nullptr;
  const char* runpath = nullptr;
  uint8_t build_id[kMaxBuildId];  // the first build_id_len bytes
  size_t build_id_len = 0;
  uint64_t flags_1 = 0;
  bool is_main = false;
  bool is_vdso = false;
  bool is_ldso = false;
  // The working directory at the load, only when path is relative ("./x.so", or found
  // through a relative LD_LIBRARY_PATH entry): the program may have chdir()ed since.
  const char* cwd = nullptr;
  // Not sent: the first page ld.so write-protects after relocating (PT_GNU_RELRO),
  // which tells the audit library when relocation is done (audit.cc's recent_relro).
  uintptr_t relro_start = 0;
};

// True for environment variables whose values matter to the loader or to Python
// imports; every other variable is recorded by name only (traces end up in CI
// artifacts, so no secrets in them).
bool LoaderRelevantEnv(const char* entry);

// Each writes one complete Event message (no length prefix) into w.
void EncodeProcessStart(wire::Writer& w, const EventHead& h, const ProcessStartInfo& p);
void EncodeSearch(wire::Writer& w, const EventHead& h, const SearchInfo& s);
void EncodeObjOpen(wire::Writer& w, const EventHead& h, const ObjectInfo& o);
void EncodeObjClose(wire::Writer& w, const EventHead& h, uint64_t id, bool unrelocated);
void EncodeActivity(wire::Writer& w, const EventHead& h, uint32_t kind, uint64_t id);
void EncodePreinit(wire::Writer& w, const EventHead& h);
void EncodeExit(wire::Writer& w, const EventHead& h);

// A TraceHeader message (for LDSCOPE_DIR files written by the audit library).
void EncodeTraceHeader(wire::Writer& w, const char* host, const char* glibc_version,
                       uint64_t start_unix_ns, uint64_t pid_namespace);

}  // namespace ldscope::audit
