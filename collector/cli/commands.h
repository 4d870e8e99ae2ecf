// One function per sub-command; main.cc wires them to CLI11.
#pragma once

#include <string>
#include <vector>

namespace ldscope::cli {

// Exit statuses of ldscope itself (run passes the command's own status through).
enum Exit : int {
  kOk = 0,
  kDamagedTrace = 1,  // show: a trace was truncated or corrupt (the rest is shown)
  kUsage = 2,         // bad arguments, unreadable input, cannot start
};

struct RunOptions {
  std::string output;             // trace file; default ldscope-<time>-<pid>.ldscope
  bool quiet = false;
  std::vector<std::string> command;
};
int Run(const RunOptions& opt);

struct CollectOptions {
  std::string socket;
  std::string output;
  bool quiet = false;
};
int Collect(const CollectOptions& opt);

struct ShowOptions {
  std::vector<std::string> traces;
  std::string format = "text";
  bool timestamps = true;
  bool verbose = false;
};
int Show(const ShowOptions& opt);

// The audit library that belongs to this ldscope binary: LDSCOPE_AUDIT_LIB, else
// next to the executable (build tree), else in the install's lib/ldscope.
std::string FindAuditLibrary(std::string* error);

// "ldscope: " + message on stderr.
void Complain(const std::string& message);

}  // namespace ldscope::cli
