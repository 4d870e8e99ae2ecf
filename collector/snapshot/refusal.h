// Why the kernel refused to let ldscope read a process, and how to allow it. The kernel
// (ptrace_may_access, PTRACE_MODE_ATTACH_REALCREDS, for process_vm_readv, /proc/PID/mem
// and /proc/PID/auxv) checks, in this order: the user and group ids (the target's real,
// effective and saved ids must all be the reader's), unless the reader has
// CAP_SYS_PTRACE in the target's user namespace; the target's dumpable flag (a
// set-user-ID program, prctl(PR_SET_DUMPABLE, 0)), under the same exception; then the
// security modules: Yama's kernel.yama.ptrace_scope (1: only the reader's descendants
// and processes that named it with PR_SET_PTRACER, 2: only with CAP_SYS_PTRACE, 3:
// nobody), AppArmor, SELinux. Which rule refused is decided from what /proc says
// (AccessFacts), by a pure function.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ldscope::snapshot {

struct AccessFacts {
  pid_t pid = 0;
  std::string what;  // what could not be read ("its memory", "/proc/PID/auxv")
  int err = 0;       // the errno the kernel gave
  // The target's ids (/proc/PID/status: real, effective, saved, file system); empty
  // where they could not be read.
  std::vector<uid_t> target_uids;
  std::vector<gid_t> target_gids;
  uid_t uid = 0;  // ldscope's effective ids
  gid_t gid = 0;
  bool cap_sys_ptrace = false;  // in ldscope's effective set
  // The target's user namespace is not ldscope's, and ldscope's is not the initial one:
  // ldscope runs in a container the target is not in, so its CAP_SYS_PTRACE may not
  // count there.
  bool outside_user_ns = false;
  uid_t proc_owner = 0;     // the owner of /proc/PID/status: root when the target is not dumpable
  bool proc_known = true;   // /proc/PID/status could be stat'ed
  std::string yama_scope;   // kernel.yama.ptrace_scope; "" where the kernel has no Yama
  bool descendant = false;  // the target descends from ldscope (Yama's scope 1 allows that)
};

// One line: "pid N: cannot read WHAT (ERRNO TEXT): RULE: HOW TO ALLOW IT".
std::string Refusal(const AccessFacts& f);

// The facts of this machine about pid.
AccessFacts GatherAccessFacts(pid_t pid, const std::string& what, int err);

}  // namespace ldscope::snapshot
