// A process for `ldscope snapshot` tests (tests/drivers/snapwait.c) whose lifetime the
// test controls: it runs its steps, says "ready", and waits for its standard input to end.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ldscope::testing {

class Waiting {
 public:
  // Starts argv (prefix: a wrapper such as setpriv or unshare, then the program) and
  // waits (30 s at most) for the line "ready" on its standard output.
  explicit Waiting(const std::vector<std::string>& argv);
  ~Waiting();  // ends it: closes its standard input, waits for it
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;

  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }
  const std::string& said() const { return said_; }  // what it printed before "ready" (or instead)
  // Closes its standard input: it exits, and stays a zombie until Reap.
  void Release();
  // Waits for it (after Release); its exit status.
  int Reap();

 private:
  pid_t pid_ = -1;
  int in_ = -1;
  bool ready_ = false, reaped_ = false;
  std::string said_;
};

}  // namespace ldscope::testing
