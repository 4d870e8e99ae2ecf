// `ldscope diff BASE NEW`: regression traces for CI.
#include <cstdio>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "analysis/diff.h"
#include "cli/commands.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"

namespace ldscope::cli {

int Diff(const DiffOptions& opt) {
  if (RefuseTooLarge({opt.base, opt.now})) return kUsage;
  const store::TraceSet base = store::LoadTracesIndexed({opt.base});
  const store::TraceSet now = store::LoadTracesIndexed({opt.now});
  int rc = kOk;
  for (const auto* set : {&base, &now}) {
    for (const auto& e : set->errors) Complain(e);
    for (const auto& f : set->files)
      if (!f.ok()) ComplainDamage(f.problem->file, f.problem->offset, f.problem->message, "comparing");
    if (!store::AnyReadable(*set)) return NoTrace();
    for (const auto& f : set->files)
      if (!f.ok()) rc = kDamagedTrace;
  }
  const elf::TraceFacts base_facts = analysis::FactsOf(base), now_facts = analysis::FactsOf(now);
  const v1::Diff d = analysis::DiffTimelines(model::BuildTimeline(base), model::BuildTimeline(now),
                                             &base_facts, &now_facts);
  if (!Print(stdout, opt.format == "json" ? render::Json(d) : render::DiffText(d)))
    return kWriteFailed;
  bool changed = false;
  for (const auto& p : d.processes()) changed |= p.changes_size() > 0;
  for (const auto& w : opt.fail_on)
    if ((w == "new-findings" && d.new_findings_size() > 0) || (w == "changes" && changed))
      return kFindings;
  return rc;
}

}  // namespace ldscope::cli
