// The passes: one table of each pass's name, the finding kinds it reports and its
// function. The driver runs them in the table's order; the finding kinds' words that
// --fail-on takes are those of the kinds the table names, and a test checks that the
// README's finding table lists exactly these kinds. A new finding kind is reported by a
// pass of this table.
#pragma once

#include <string>
#include <vector>

#include "analysis/context.h"
#include "ldscope_proto/report.pb.h"

namespace ldscope::analysis {

struct RegisteredPass {
  const char* name;                    // its file under analysis/, without ".cc"
  std::vector<v1::FindingKind> kinds;  // what it reports
  // A pure function of one trace's context to findings; nullptr for a pass over several
  // traces' contexts (fleet.h: `report` over several hosts runs it).
  void (*run)(Context& ctx, v1::Report* out);
};

// In the order the driver runs them.
const std::vector<RegisteredPass>& Passes();
// The pass's row of `report --perf` (text/timer.h): "pass NAME".
std::string PassPhase(const RegisteredPass& p);
// Every kind a pass reports, in the enum's order.
std::vector<v1::FindingKind> ReportedKinds();

}  // namespace ldscope::analysis
