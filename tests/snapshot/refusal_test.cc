// The rule a refusal names (snapshot/refusal.h), for every branch: the kernel's order
// (ids, dumpable, Yama), CAP_SYS_PTRACE's exceptions and where it does not count (a
// reader in a container the target is not in), Yama's descendants. Each case's whole
// message in one golden; the real kernel's refusals are snapshot_test's.
#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "snapshot/refusal.h"
#include "support/test_support.h"

namespace ldscope::testing {
namespace {

using snapshot::AccessFacts;

// A user's process read by ldscope of the same user, nothing refusing: the base that
// each case changes.
AccessFacts Same() {
  AccessFacts f;
  f.pid = 4242;
  f.what = "its memory";
  f.err = EPERM;
  f.target_uids = {1000, 1000, 1000, 1000};
  f.target_gids = {1000, 1000, 1000, 1000};
  f.uid = 1000;
  f.gid = 1000;
  f.proc_owner = 1000;
  return f;
}

TEST(Refusal, EveryRule) {
  std::string text;
  auto add = [&](const std::string& name, const AccessFacts& f) {
    text += "## " + name + "\n" + snapshot::Refusal(f) + "\n\n";
  };
  AccessFacts f = Same();
  f.target_uids = {0, 0, 0, 0};
  f.target_gids = {0, 0, 0, 0};
  f.proc_owner = 0;
  add("another user (root's process)", f);
  f.cap_sys_ptrace = true;
  add("another user, CAP_SYS_PTRACE: nothing the ids explain", f);

  f = Same();
  f.target_uids = {1000, 0, 0, 0};
  f.proc_owner = 0;
  add("a set-user-ID program started by the same user", f);

  f = Same();
  f.target_gids = {1000, 50, 50, 50};
  add("a set-group-ID program started by the same user", f);

  f = Same();
  f.proc_owner = 0;
  add("not dumpable", f);
  f.cap_sys_ptrace = true;
  add("not dumpable, CAP_SYS_PTRACE: nothing that explains it", f);

  for (const char* scope : {"1", "2", "3"}) {
    f = Same();
    f.yama_scope = scope;
    add(std::string("Yama ptrace_scope ") + scope, f);
    f.cap_sys_ptrace = true;
    add(std::string("Yama ptrace_scope ") + scope + ", CAP_SYS_PTRACE", f);
  }
  f = Same();
  f.yama_scope = "1";
  f.descendant = true;
  add("Yama ptrace_scope 1, a descendant: not Yama", f);
  f = Same();
  f.yama_scope = "3";
  f.target_uids = {0, 0, 0, 0};
  add("Yama ptrace_scope 3 and another user: scope 3 first (nothing else would allow it)", f);
  f = Same();
  f.yama_scope = "1";
  f.target_uids = {0, 0, 0, 0};
  add("Yama ptrace_scope 1 and another user: the ids first (the kernel's order)", f);

  f = Same();
  f.outside_user_ns = true;
  f.cap_sys_ptrace = true;
  f.uid = 0;
  f.gid = 0;
  add("root in a container, the process outside it", f);
  f = Same();
  f.outside_user_ns = true;
  add("the same ids in another user namespace: not the namespace's doing", f);

  f = Same();
  add("nothing the kernel's ids, dumpable flag or Yama explain", f);
  f = Same();
  f.what = "/proc/4242/auxv";
  f.err = EACCES;
  f.target_uids = {};
  f.target_gids = {};
  f.proc_known = false;
  add("nothing known of the process", f);
  ExpectGolden("snapshot_refusals.txt", text);
}

}  // namespace
}  // namespace ldscope::testing
