// See refusal.h.
#include "snapshot/refusal.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace ldscope::snapshot {
namespace {

// "uid 1000", or "uids 1000 (real), 0 (effective), 0 (saved)" when they differ: the
// kernel compares the real, effective and saved ids.
template <typename Id>
std::string Ids(const char* kind, const std::vector<Id>& ids) {
  if (ids.empty()) return fmt::format("{} ?", kind);
  const size_t n = std::min<size_t>(ids.size(), 3);
  if (std::all_of(ids.begin(), ids.begin() + n, [&](Id v) { return v == ids[0]; }))
    return fmt::format("{} {}", kind, ids[0]);
  static const char* kRole[] = {"real", "effective", "saved"};
  std::string out = fmt::format("{}s ", kind);
  for (size_t i = 0; i < n; ++i) out += fmt::format("{}{} ({})", i ? ", " : "", ids[i], kRole[i]);
  return out;
}

// Whether any of the real, effective and saved ids is not mine.
template <typename Id>
bool Other(const std::vector<Id>& ids, Id mine) {
  const size_t n = std::min<size_t>(ids.size(), 3);
  return std::any_of(ids.begin(), ids.begin() + n, [&](Id v) { return v != mine; });
}

}  // namespace

std::string Refusal(const AccessFacts& f) {
  const std::string head = fmt::format("pid {}: cannot read {} ({})", f.pid, f.what, std::strerror(f.err));
  const bool other_user = Other(f.target_uids, f.uid);
  const bool other_group = Other(f.target_gids, f.gid);
  // CAP_SYS_PTRACE counts in the target's user namespace and those below ldscope's.
  const bool cap = f.cap_sys_ptrace && !f.outside_user_ns;
  if (f.yama_scope == "3")
    return fmt::format(
        "{}: kernel.yama.ptrace_scope is 3, which lets no process read another, not even root's, and cannot be "
        "lowered until the machine restarts",
        head);
  if (f.outside_user_ns && (other_user || other_group || f.cap_sys_ptrace))
    return fmt::format(
        "{}: the process is in another user namespace than ldscope (ldscope runs in a container the process is "
        "not in), where ldscope's user and CAP_SYS_PTRACE do not count: run ldscope in the process's own "
        "namespace (in its container, or on the host)",
        head);
  if (other_user && !cap)
    return fmt::format(
        "{}: the process runs as {}, ldscope as uid {}; the kernel lets a process read only processes whose real, "
        "effective and saved user ids are all its own, unless it has CAP_SYS_PTRACE: run ldscope as that user, or "
        "as root (sudo ldscope snapshot {})",
        head, Ids("uid", f.target_uids), f.uid, f.pid);
  if (other_group && !cap)
    return fmt::format(
        "{}: the process runs as {}, ldscope as gid {}; the kernel lets a process read only processes whose real, "
        "effective and saved group ids are all its own (a set-group-ID program's are not), unless it has "
        "CAP_SYS_PTRACE: run ldscope as root (sudo ldscope snapshot {})",
        head, Ids("gid", f.target_gids), f.gid, f.pid);
  const uid_t owner = f.target_uids.size() > 1 ? f.target_uids[1] : f.uid;
  if (f.proc_known && f.proc_owner != owner && !cap)
    return fmt::format(
        "{}: the process is not dumpable (a set-user-ID or file-capability program, or "
        "prctl(PR_SET_DUMPABLE, 0)), so only a process with CAP_SYS_PTRACE may read it: run ldscope "
        "as root (sudo ldscope snapshot {})",
        head, f.pid);
  if (f.yama_scope == "2" && !cap)
    return fmt::format(
        "{}: kernel.yama.ptrace_scope is 2, which lets only processes with CAP_SYS_PTRACE read others: run "
        "ldscope as root (sudo ldscope snapshot {})",
        head, f.pid);
  if (f.yama_scope == "1" && !cap && !f.descendant)
    return fmt::format(
        "{}: kernel.yama.ptrace_scope is 1, which lets a process read only its own descendants and the processes "
        "that named it as their reader (prctl PR_SET_PTRACER, as ldscope.snapshot() does in its own process): run "
        "ldscope with CAP_SYS_PTRACE (sudo ldscope snapshot {}), or allow reading processes of the same user with "
        "`sudo sysctl kernel.yama.ptrace_scope=0`",
        head, f.pid);
  return fmt::format(
      "{}: refused although the ids, the dumpable flag and kernel.yama.ptrace_scope allow it: a security module "
      "(AppArmor, SELinux) or a container boundary (another user namespace, a seccomp filter) refuses it; run "
      "ldscope in the process's container, or as its user there",
      head);
}

}  // namespace ldscope::snapshot
