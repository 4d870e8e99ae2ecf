// Event encoders (see encode.h). Kept free of libc calls other than strlen/memcmp so
// they are safe in the audit namespace under the loader's locks.
#include "encode.h"
#include "redact.h"

#include <cstring>

namespace ldscope::audit {
namespace {

using wire::Writer;

// Length of the NAME part of "NAME=value".
size_t NameLen(const char* entry) {
  const char* eq = std::strchr(entry, '=');
  return eq ? static_cast<size_t>(eq - entry) : std::strlen(entry);
}

void Head(Writer& w, const EventHead& h) {
  w.VarintNonZero(field::kPid, h.pid);
  w.VarintNonZero(field::kTid, h.tid);
  w.VarintNonZero(field::kSeq, h.seq);
  if (h.image_start_ns != 0 && h.mono_ns >= h.image_start_ns)
    w.Varint(field::kOffsetNs, h.mono_ns - h.image_start_ns);
  else
    w.VarintNonZero(field::kMonoNs, h.mono_ns);
  w.VarintNonZero(field::kDropped, h.dropped);
}

// The truncated flag goes last: only then do we know (field order is free in protobuf).
void Tail(Writer& w) {
  if (w.truncated()) {
    // Writing the flag itself needs 2 bytes; Room() keeps them unless the buffer is
    // exhausted, in which case the reader still sees a valid, shorter event.
    w.Bool(field::kTruncated, true);
  }
}

}  // namespace

namespace {

// A variable LoaderRelevantEnv keeps the value of: by name prefix, or by whole name.
struct EnvRule {
  const char* text;
  size_t len;
  bool prefix;
};
template <size_t N>
constexpr EnvRule Prefix(const char (&s)[N]) { return {s, N - 1, true}; }
template <size_t N>
constexpr EnvRule Name(const char (&s)[N]) { return {s, N - 1, false}; }

// The rank variables of torchrun, Slurm and Open MPI tell a job's processes apart
// (JUnit properties, per-rank comparisons); the CI job ids tie a trace to its job
// (OTLP resource attributes); GLIBC_TUNABLES sizes the static TLS surplus
// (glibc.rtld.nns, glibc.rtld.optional_static_tls).
// clang-format off
constexpr EnvRule kEnvRules[] = {
    Prefix("LD_"), Prefix("PYTHON"), Prefix("CUDA"), Prefix("NCCL"), Prefix("LDSCOPE_"),
    Name("PATH"), Name("CONDA_PREFIX"), Name("VIRTUAL_ENV"), Name("RANK"), Name("LOCAL_RANK"),
    Name("WORLD_SIZE"), Name("SLURM_PROCID"), Name("SLURM_LOCALID"), Name("SLURM_NODEID"),
    Name("OMPI_COMM_WORLD_RANK"), Name("OMPI_COMM_WORLD_LOCAL_RANK"), Name("GITHUB_RUN_ID"),
    Name("CI_JOB_ID"), Name("GLIBC_TUNABLES")};
// clang-format on

}  // namespace

// Called twice per variable at every process start: the first byte rules out most
// rules, and no length is measured (the audit library's string functions are plain loops).
bool LoaderRelevantEnv(const char* entry) {
  static constexpr auto kFirst = [] {  // the first bytes of the rules, as a set
    struct { uint64_t bits[4] = {}; } set;
    for (const EnvRule& r : kEnvRules) {
      const auto c = static_cast<unsigned char>(r.text[0]);
      set.bits[c / 64] |= uint64_t{1} << (c % 64);
    }
    return set;
  }();
  const auto c0 = static_cast<unsigned char>(entry[0]);
  if ((kFirst.bits[c0 / 64] & (uint64_t{1} << (c0 % 64))) == 0) return false;
  for (const EnvRule& r : kEnvRules) {
    if (r.text[0] != entry[0] || std::strncmp(entry, r.text, r.len) != 0) continue;
    // A whole name: the entry's NAME (up to its '=') is exactly r.text.
    if (r.prefix || entry[r.len] == '=' || entry[r.len] == '\0') return true;
  }
  return false;
}

namespace {

// One environment entry: the name, and the value for loader-relevant variables.
void EnvEntryField(Writer& w, const char* entry, bool relevant) {
  auto ev = w.BeginNested(field::process_start::kEnv);
  const size_t name_len = NameLen(entry);
  w.Bytes(field::env_var::kName, entry, name_len, 256);
  if (!relevant) {
    w.Bool(field::env_var::kRedacted, true);
  } else if (entry[name_len] == '=') {
    const char* value = entry + name_len + 1;
    w.Bytes(field::env_var::kValue, value, std::strlen(value), kMaxString);
  }
  w.EndNested(ev);
}

void EnvFields(Writer& w, char* const* environ, bool relevant) {
  if (environ == nullptr) return;
  for (char* const* e = environ; *e != nullptr; ++e)
    if (LoaderRelevantEnv(*e) == relevant) EnvEntryField(w, *e, relevant);
}

void ArgvFields(Writer& w, const ProcessStartInfo& p) {
  if (p.cmdline == nullptr) return;
  const char* s = p.cmdline;
  const char* end = p.cmdline + p.cmdline_len;
  bool redact_next = false;  // the previous argument named a secret (redact.h)
  while (s < end) {
    const size_t len = strnlen(s, static_cast<size_t>(end - s));
    const redact::Verdict v = p.keep_argv ? redact::Verdict{len} : redact::Judge(s, len);
    if (redact_next)
      w.Bytes(field::process_start::kArgv, redact::kRedacted, redact::kRedactedLen);
    else if (v.value)
      w.Bytes2(field::process_start::kArgv, s, v.keep < kMaxString ? v.keep : kMaxString, redact::kRedacted,
               redact::kRedactedLen);
    else
      w.Bytes(field::process_start::kArgv, s, len, kMaxString);
    redact_next = v.next;
    s += len + 1;
  }
  if (p.cmdline_truncated) w.MarkTruncated();
}

}  // namespace

// The event has a fixed budget (the caller's buffer): what the loader's behaviour
// depends on goes first (the small fields, then loader-relevant variables with their
// values), then as many arguments as fit, then the names of the other variables.
// Whatever does not fit is left out and the event marked truncated.
void EncodeProcessStart(Writer& w, const EventHead& h, const ProcessStartInfo& p) {
  Head(w, h);
  const size_t held = w.Reserve(4);  // for Tail's flag
  auto n = w.BeginNested(field::kProcessStart);
  w.VarintNonZero(field::process_start::kReason, p.reason);
  w.SignedAsVarint(field::process_start::kPpid, p.ppid);
  w.StringNonEmpty(field::process_start::kExe, p.exe, kMaxString);
  w.StringNonEmpty(field::process_start::kCwd, p.cwd, kMaxString);
  w.StringNonEmpty(field::process_start::kGlibcVersion, p.glibc_version, 64);
  w.VarintNonZero(field::process_start::kImageStartNs, p.image_start_ns);
  w.SignedAsVarint(field::process_start::kParentPid, p.parent_pid);
  w.VarintNonZero(field::process_start::kParentImageStartNs, p.parent_image_start_ns);
  w.VarintNonZero(field::process_start::kParentSeqAtFork, p.parent_seq_at_fork);
  w.VarintNonZero(field::process_start::kLavVersion, p.lav_version);
  w.Bool(field::process_start::kSecure, p.secure);
  w.VarintNonZero(field::process_start::kPidNamespace, p.pid_namespace);
  w.VarintNonZero(field::process_start::kNotTraced, p.not_traced);
  w.VarintNonZero(field::process_start::kFdLimit, p.fd_limit);
  EnvFields(w, p.environ, true);
  ArgvFields(w, p);
  EnvFields(w, p.environ, false);
  if (p.cut) w.MarkTruncated();
  w.EndNested(n);
  w.Unreserve(held);
  Tail(w);
}

void EncodeSearch(Writer& w, const EventHead& h, const SearchInfo& s) {
  Head(w, h);
  auto n = w.BeginNested(field::kSearch);
  w.StringNonEmpty(field::search::kName, s.name, kMaxString);
  w.StringNonEmpty(field::search::kCandidate, s.candidate, kMaxString);
  w.VarintNonZero(field::search::kFlag, s.flag);
  w.VarintNonZero(field::search::kRequester, s.requester);
  w.VarintNonZero(field::search::kDirRef, s.dir_ref);
  if (s.dir != nullptr) w.Bytes(field::search::kDir, s.dir, s.dir_len, kMaxString);
  w.StringNonEmpty(field::search::kBase, s.base, kMaxString);
  w.EndNested(n);
  Tail(w);
}

void EncodeObjOpen(Writer& w, const EventHead& h, const ObjectInfo& o) {
  Head(w, h);
  auto n = w.BeginNested(field::kObjOpen);
  w.VarintNonZero(field::obj_open::kId, o.id);
  w.StringNonEmpty(field::obj_open::kPath, o.path, kMaxString);
  w.SignedAsVarint(field::obj_open::kLmid, o.lmid);
  w.VarintNonZero(field::obj_open::kBase, o.base);
  w.VarintNonZero(field::obj_open::kDev, o.dev);
  w.VarintNonZero(field::obj_open::kIno, o.ino);
  w.StringNonEmpty(field::obj_open::kSoname, o.soname, kMaxString);
  for (size_t i = 0; i < o.n_needed; ++i)
    w.String(field::obj_open::kNeeded, o.needed[i], kMaxString);
  if (o.needed_truncated) w.MarkTruncated();
  w.StringNonEmpty(field::obj_open::kRpath, o.rpath, kMaxString);
  w.StringNonEmpty(field::obj_open::kRunpath, o.runpath, kMaxString);
  if (o.build_id_len > 0)
    w.Bytes(field::obj_open::kBuildId, o.build_id, o.build_id_len, kMaxBuildId);
  w.VarintNonZero(field::obj_open::kFlags1, o.flags_1);
  w.Bool(field::obj_open::kIsMain, o.is_main);
  w.Bool(field::obj_open::kIsVdso, o.is_vdso);
  w.Bool(field::obj_open::kIsLdso, o.is_ldso);
  w.StringNonEmpty(field::obj_open::kCwd, o.cwd, kMaxString);
  w.EndNested(n);
  Tail(w);
}

void EncodeObjClose(Writer& w, const EventHead& h, uint64_t id, bool unrelocated) {
  Head(w, h);
  auto n = w.BeginNested(field::kObjClose);
  w.VarintNonZero(field::obj_close::kId, id);
  w.Bool(field::obj_close::kUnrelocated, unrelocated);
  w.EndNested(n);
  Tail(w);
}

void EncodeActivity(Writer& w, const EventHead& h, uint32_t kind, uint64_t id) {
  Head(w, h);
  auto n = w.BeginNested(field::kActivity);
  w.VarintNonZero(field::activity::kKind, kind);
  w.VarintNonZero(field::activity::kId, id);
  w.EndNested(n);
  Tail(w);
}

void EncodePreinit(Writer& w, const EventHead& h) {
  Head(w, h);
  w.EndNested(w.BeginNested(field::kPreinit));
  Tail(w);
}

void EncodeExit(Writer& w, const EventHead& h) {
  Head(w, h);
  w.EndNested(w.BeginNested(field::kExit));
  Tail(w);
}

void EncodeTraceHeader(Writer& w, const char* host, const char* glibc_version,
                       uint64_t start_unix_ns, uint64_t pid_namespace) {
  w.Varint(field::trace_header::kFormatVersion, 1);
  w.StringNonEmpty(field::trace_header::kHost, host, 256);
  w.StringNonEmpty(field::trace_header::kGlibcVersion, glibc_version, 64);
  w.VarintNonZero(field::trace_header::kStartUnixNs, start_unix_ns);
  w.String(field::trace_header::kWriter, "libldscope_audit");
  w.VarintNonZero(field::trace_header::kPidNamespace, pid_namespace);
}

}  // namespace ldscope::audit
