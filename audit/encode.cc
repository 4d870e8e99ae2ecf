// Event encoders (see encode.h). Kept free of libc calls other than strlen/memcmp so
// they are safe in the audit namespace under the loader's locks.
#include "encode.h"

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
// (OTLP resource attributes).
constexpr EnvRule kEnvRules[] = {
    Prefix("LD_"), Prefix("PYTHON"), Prefix("CUDA"), Prefix("NCCL"), Prefix("LDSCOPE_"),
    Name("PATH"), Name("CONDA_PREFIX"), Name("VIRTUAL_ENV"), Name("RANK"), Name("LOCAL_RANK"),
    Name("WORLD_SIZE"), Name("SLURM_PROCID"), Name("SLURM_LOCALID"), Name("SLURM_NODEID"),
    Name("OMPI_COMM_WORLD_RANK"), Name("OMPI_COMM_WORLD_LOCAL_RANK"), Name("GITHUB_RUN_ID"),
    Name("CI_JOB_ID")};

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
  auto ev = w.BeginNested(7);
  const size_t name_len = NameLen(entry);
  w.Bytes(1, entry, name_len, 256);
  if (!relevant) {
    w.Bool(3, true);
  } else if (entry[name_len] == '=') {
    const char* value = entry + name_len + 1;
    w.Bytes(2, value, std::strlen(value), kMaxString);
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
  while (s < end) {
    const size_t len = strnlen(s, static_cast<size_t>(end - s));
    w.Bytes(4, s, len, kMaxString);
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
  w.VarintNonZero(1, p.reason);
  w.SignedAsVarint(2, p.ppid);
  w.StringNonEmpty(3, p.exe, kMaxString);
  w.StringNonEmpty(5, p.cwd, kMaxString);
  w.StringNonEmpty(6, p.glibc_version, 64);
  w.VarintNonZero(8, p.image_start_ns);
  w.SignedAsVarint(9, p.parent_pid);
  w.VarintNonZero(10, p.parent_image_start_ns);
  w.VarintNonZero(11, p.parent_seq_at_fork);
  w.VarintNonZero(12, p.lav_version);
  w.Bool(13, p.secure);
  w.VarintNonZero(20, p.pid_namespace);
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
  w.StringNonEmpty(1, s.name, kMaxString);
  w.StringNonEmpty(2, s.candidate, kMaxString);
  w.VarintNonZero(3, s.flag);
  w.VarintNonZero(4, s.requester);
  w.VarintNonZero(5, s.dir_ref);
  if (s.dir != nullptr) w.Bytes(6, s.dir, s.dir_len, kMaxString);
  w.StringNonEmpty(7, s.base, kMaxString);
  w.EndNested(n);
  Tail(w);
}

void EncodeObjOpen(Writer& w, const EventHead& h, const ObjectInfo& o) {
  Head(w, h);
  auto n = w.BeginNested(field::kObjOpen);
  w.VarintNonZero(1, o.id);
  w.StringNonEmpty(2, o.path, kMaxString);
  w.SignedAsVarint(3, o.lmid);
  w.VarintNonZero(4, o.base);
  w.VarintNonZero(5, o.dev);
  w.VarintNonZero(6, o.ino);
  w.StringNonEmpty(7, o.soname, kMaxString);
  for (size_t i = 0; i < o.n_needed; ++i) w.String(8, o.needed[i], kMaxString);
  if (o.needed_truncated) w.MarkTruncated();
  w.StringNonEmpty(9, o.rpath, kMaxString);
  w.StringNonEmpty(10, o.runpath, kMaxString);
  if (o.build_id_len > 0) w.Bytes(11, o.build_id, o.build_id_len, kMaxBuildId);
  w.VarintNonZero(12, o.flags_1);
  w.Bool(13, o.is_main);
  w.Bool(14, o.is_vdso);
  w.Bool(15, o.is_ldso);
  w.StringNonEmpty(16, o.cwd, kMaxString);
  w.EndNested(n);
  Tail(w);
}

void EncodeObjClose(Writer& w, const EventHead& h, uint64_t id, bool unrelocated) {
  Head(w, h);
  auto n = w.BeginNested(field::kObjClose);
  w.VarintNonZero(1, id);
  w.Bool(2, unrelocated);
  w.EndNested(n);
  Tail(w);
}

void EncodeActivity(Writer& w, const EventHead& h, uint32_t kind, uint64_t id) {
  Head(w, h);
  auto n = w.BeginNested(field::kActivity);
  w.VarintNonZero(1, kind);
  w.VarintNonZero(2, id);
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
  w.Varint(1, 1);
  w.StringNonEmpty(2, host, 256);
  w.StringNonEmpty(3, glibc_version, 64);
  w.VarintNonZero(4, start_unix_ns);
  w.String(5, "libldscope_audit");
  w.VarintNonZero(10, pid_namespace);
}

}  // namespace ldscope::audit
