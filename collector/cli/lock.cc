// `ldscope lock` (write a lock file: what each program of a workload loaded) and
// `ldscope check --lock` (compare traces with one; `run --lock` does the same after
// the command).
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "analysis/lock.h"
#include "cli/commands.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/lock_file.h"
#include "store/output_file.h"
#include "store/trace_file.h"
#include "text/escape.h"
#include "text/shown.h"

namespace ldscope::cli {
namespace {

// Loads traces as report does, saying what is damaged. Returns false (after
// NoTrace()) when nothing could be read.
bool LoadTimeline(const std::vector<std::string>& paths, const char* what, v1::Timeline* out) {
  const store::TraceSet traces = store::LoadTracesIndexed(paths);
  *out = model::BuildTimeline(traces);
  for (const auto& p : out->problems()) ComplainDamage(p.file(), p.offset(), p.message(), what);
  return store::AnyReadable(traces);
}

bool GithubWanted(bool flag) {
  const char* gha = std::getenv("GITHUB_ACTIONS");
  return flag || (gha != nullptr && std::string(gha) == "true");
}

}  // namespace

int CheckAgainstLock(const v1::Timeline& timeline, const v1::Lock& lock,
                     const std::string& lock_name, bool ignore_build_id, bool github,
                     std::FILE* out) {
  const v1::LockCheck c = analysis::CheckLock(lock, analysis::MakeLock(timeline), ignore_build_id);
  if (GithubWanted(github)) {
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary != nullptr && *summary) {
      if (Status s = store::WriteTextFile(summary, render::GithubLockSummary(c, lock_name), store::OutputMode::kAppend);
          !s.ok()) {
        Complain("GITHUB_STEP_SUMMARY: " + s.error());
        return kWriteFailed;
      }
    }
  }
  if (c.differences_size() == 0) return kOk;
  if (!Print(out, render::LockCheckText(c, lock_name))) return kWriteFailed;
  if (GithubWanted(github) && !Print(out, render::GithubLockAnnotations(c, lock_name)))
    return kWriteFailed;
  return kFindings;
}

int Lock(const LockOptions& opt) {
  if (Status s = store::CheckOutputs({{"-o", opt.output}}, opt.traces); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  if (RefuseTooLarge(opt.traces)) return kUsage;
  v1::Timeline timeline;
  if (!LoadTimeline(opt.traces, "locking", &timeline)) return NoTrace();
  // A lock is a baseline: say where the trace may not hold everything that was loaded.
  for (const auto& p : timeline.processes()) {
    const uint64_t lost = p.dropped() + p.missing_seqs();
    if (lost > 0)
      Complain(text::Show("pid {} ({}): {} event{} lost: the lock may miss what {} loaded", p.pid(), p.exe(), lost,
                          lost == 1 ? "" : "s", lost == 1 ? "it" : "they")
                   .str());
    if (p.still_running())
      Complain(text::Show("pid {} ({}) was still running when recording stopped: the lock may "
                          "miss what it loaded later",
                          p.pid(), p.exe())
                   .str());
  }
  const std::string text = store::FormatLock(analysis::MakeLock(timeline));
  if (opt.output.empty() || opt.output == "-") {
    if (!Print(stdout, text)) return kWriteFailed;
  } else if (Status s = store::WriteTextFile(opt.output, text); !s.ok()) {
    Complain("the lock: " + s.error());
    return kWriteFailed;
  }
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

int Check(const CheckOptions& opt) {
  const Result<v1::Lock> read = store::ReadLockFile(opt.lock);
  if (!read.ok()) {
    Complain(read.error());
    return kUsage;
  }
  const v1::Lock& lock = *read;
  if (RefuseTooLarge(opt.traces)) return kUsage;
  v1::Timeline timeline;
  if (!LoadTimeline(opt.traces, "checking", &timeline)) return NoTrace();
  const int rc = CheckAgainstLock(timeline, lock, text::Escape(opt.lock), opt.ignore_build_id,
                                  opt.github, stdout);
  if (rc != kOk) return rc;
  return timeline.problems_size() > 0 ? kDamagedTrace : kOk;
}

}  // namespace ldscope::cli
