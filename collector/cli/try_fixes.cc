// `ldscope run --try-fixes`: the environment and import-order fixes of the error findings,
// each tried by running the command again, traced as `run` traces it, with the change
// applied; the trial's trace analysed, and the fix marked verified when the finding is
// gone, no new failure names its objects, and the command exits 0 (or as it did, where it
// did not fail) (Fix.verified).
//
// Rules: only the fixes of error findings that carry their change as data (Fix.env,
// Fix.move); each distinct change runs once; a trial may take twice as long as the
// command took, at least kMinTrialSeconds, then it is stopped (SIGTERM to its process
// group, SIGKILL kGraceSeconds later); its standard input is /dev/null, its standard
// output and error go to a file in the trials' directory (with its trace), which is
// kept and named on stderr. An environment trial changes the command's environment only
// (`run --with-env`): ldscope, and nothing else it starts, runs with the environment the
// first run had. The user's files are never written: an import-order trial runs a moved
// copy of the script through `python -c`, under the script's own name. A trial that
// fails on a load that fails only under ldscope's audit module (static TLS laid out for
// an auditor) proves nothing traced: the command runs once more with the change,
// untraced, and its exit status decides. A fix's data (Fix.env, Fix.move) is the report's
// text: text::Unescape gives back the bytes a trial applies.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "analysis/context.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "model/timeline.h"
#include "render/words.h"
#include "store/trace_file.h"
#include "text/escape.h"
#include "text/strings.h"

namespace ldscope::cli {
namespace {

constexpr double kMinTrialSeconds = 10;
constexpr double kGraceSeconds = 5;

volatile sig_atomic_t g_stop = 0;
void Stop(int) { g_stop = 1; }

bool EnvAction(v1::FixAction a) {
  return a == v1::FIX_SET_VARIABLE || a == v1::FIX_DROP_FROM_LD_LIBRARY_PATH || a == v1::FIX_DROP_FROM_LD_PRELOAD ||
         a == v1::FIX_PRELOAD_BY_PATH || a == v1::FIX_SET_TUNABLE;
}

bool OrderAction(v1::FixAction a) { return a == v1::FIX_SWAP_IMPORTS || a == v1::FIX_SWAP_LOADS; }

// A change's identity: the same change named by two fixes runs once.
std::string ChangeKey(const v1::Fix& x) {
  if (x.has_env()) return "env\n" + x.env().variable() + "\n" + x.env().value();
  return fmt::format("move\n{}\n{}\n{}", x.move().file(), x.move().line(), x.move().above());
}

// The change in words: "with LD_PRELOAD=/x", "with line 4 of train.py above line 3",
// "with lines 6-10 of train.py above line 5".
std::string ChangeText(const v1::Fix& x) {
  if (x.has_env())
    return x.env().value().empty() ? fmt::format("with {} unset", x.env().variable())
                                   : fmt::format("with {}={}", x.env().variable(), x.env().value());
  const v1::LineMove& m = x.move();
  if (m.last() > m.line())
    return fmt::format("with lines {}-{} of {} above line {}", m.line(), m.last(), text::BaseName(m.file()), m.above());
  return fmt::format("with line {} of {} above line {}", m.line(), text::BaseName(m.file()), m.above());
}

// What a finding is about: its kind and its first object (the one that failed, was
// shadowed, ...), else its headline.
std::string Subject(const v1::Finding& f) {
  return fmt::format("{}\n{}", static_cast<int>(f.kind()),
                     f.objects_size() > 0 ? analysis::NormalPath(f.objects(0).path()) : f.headline());
}

struct Trial {
  std::string why_not;     // set when the trial could not run or be read
  int status = 0;          // the command's exit status (as `run` exits)
  bool timed_out = false;  // stopped at the limit
  double limit = 0;
  v1::Report report;
  // When the traced trial failed on a load that fails only under ldscope's audit module:
  // that finding, and the command run again with the change but untraced (its status, or
  // why it could not run).
  const v1::Finding* traced_only = nullptr;
  int untraced_status = 0;
  std::string untraced_why_not;
};

// A finding that says a load failed only because the process was traced: the report
// schema's info level of static-tls-exhausted (glibc lays the static TLS block out
// differently under an LD_AUDIT module).
bool FailedOnlyTraced(const v1::Finding& f) { return f.kind() == v1::STATIC_TLS_EXHAUSTED && f.severity() == v1::INFO; }

std::string ReadAll(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  *ok = static_cast<bool>(in) || in.eof();
  return s.str();
}

// The script with lines `line`..`last` put above line `above`, written to copy; or why not.
std::string WriteMovedCopy(const v1::LineMove& m, const std::string& copy) {
  bool ok = false;
  const std::string src = ReadAll(text::Unescape(m.file()), &ok);
  if (!ok) return fmt::format("cannot read {}", m.file());
  std::vector<std::string> lines;
  std::istringstream in(src);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const uint32_t last = m.last() == 0 ? m.line() : m.last();
  if (m.above() == 0 || m.above() >= m.line() || last < m.line() || last > lines.size())
    return fmt::format("{} has no lines {}-{} to put above line {}", m.file(), m.line(), last, m.above());
  const std::vector<std::string> moved(lines.begin() + (m.line() - 1), lines.begin() + last);
  lines.erase(lines.begin() + (m.line() - 1), lines.begin() + last);
  lines.insert(lines.begin() + (m.above() - 1), moved.begin(), moved.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  std::ofstream o(copy, std::ios::binary | std::ios::trunc);
  o << out;
  o.close();
  if (!o) return fmt::format("cannot write {}", text::Escape(copy));
  return "";
}

// Runs the copy in file `copy` as the script `path` would run: __main__ with its
// __file__, sys.argv[0] and sys.path[0] the script's, its code objects named after it.
constexpr char kRunCopy[] =
    "import sys, os\n"
    "_m = sys.modules['__main__']\n"
    "_copy, _path = sys.argv[1], os.path.abspath(sys.argv[2])\n"
    "del sys.argv[:2]\n"
    "sys.path[0] = os.path.dirname(_path)\n"
    "with open(_copy, 'rb') as _f: _code = compile(_f.read(), _path, 'exec')\n"
    "_m.__file__ = _path\n"
    "del _m, _copy, _path, _f, sys, os\n"
    "exec(_code)\n";

// The command of a trial of x: the command itself for an environment change (which
// RunTrial gives `run --with-env`), the interpreter given a moved copy for an import
// order; or why the change cannot be made.
std::string TrialCommand(const std::vector<std::string>& command, const v1::Fix& x, const std::string& copy,
                         std::vector<std::string>* out) {
  if (x.has_env()) {
    if (x.env().variable().empty() || x.env().variable().find('=') != std::string::npos)
      return fmt::format("{} is not a variable's name", x.env().variable());
    *out = command;
    return "";
  }
  const v1::LineMove& m = x.move();
  if (m.file().empty()) return "the trace does not say which file the lines are in";
  // The script: the first argument that is not an option, naming the fix's file.
  size_t k = 1;
  while (k < command.size() && command[k].size() > 1 && command[k].front() == '-') ++k;
  char a[PATH_MAX], b[PATH_MAX];
  if (k >= command.size() || realpath(command[k].c_str(), a) == nullptr ||
      realpath(text::Unescape(m.file()).c_str(), b) == nullptr || std::strcmp(a, b) != 0)
    return fmt::format("the lines are in {}, which is not the script the command names after its interpreter",
                       m.file());
  if (std::string err = WriteMovedCopy(m, copy); !err.empty()) return err;
  out->assign(command.begin(), command.begin() + static_cast<long>(k));
  out->insert(out->end(), {"-c", kRunCopy, copy});
  out->insert(out->end(), command.begin() + static_cast<long>(k), command.end());
  return "";
}

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Runs argv (the program found on PATH) with environment env in a process group of its
// own, its output in log; stops it at limit seconds. Sets t's status, or why_not.
void RunStopped(std::vector<std::string> argv, std::vector<std::string> env, const std::string& log, double limit,
                Trial* t) {
  std::vector<char*> args, envp;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0) {
    t->why_not = fmt::format("cannot open {}: {}", text::Escape(log), std::strerror(errno));
    if (out >= 0) close(out);
    if (in >= 0) close(in);
    return;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);  // an ignored signal stays ignored across exec
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out);
  close(in);
  if (pid < 0) {
    t->why_not = fmt::format("fork: {}", std::strerror(errno));
    return;
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  const double start = Now();
  double killed_at = 0;
  int st = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      t->why_not = fmt::format("waitpid: {}", std::strerror(errno));
      kill(-pid, SIGKILL);
      return;
    }
    const double now = Now();
    if (killed_at == 0 && (now - start >= limit || g_stop)) {
      t->timed_out = !g_stop;
      kill(-pid, SIGTERM);
      killed_at = now;
    } else if (killed_at > 0 && now - killed_at >= kGraceSeconds) {
      kill(-pid, SIGKILL);
    }
    const timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  kill(-pid, SIGKILL);  // whatever the command left running in its group
  if (g_stop) {
    t->why_not = "ldscope was interrupted";
    return;
  }
  t->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// Runs `ldscope run` of the trial's command (RunStopped) and analyses its trace.
Trial RunTrial(const RunOptions& opt, const std::string& self, const v1::Fix& x,
               const std::vector<std::string>& command, const std::string& trace, const std::string& log,
               double limit) {
  Trial t;
  t.limit = limit;
  std::vector<std::string> argv = {self, "run", "-q", "--no-report", "-o", trace};
  if (x.has_env()) argv.push_back("--with-env=" + text::Unescape(x.env().variable() + "=" + x.env().value()));
  if (!opt.python_hook) argv.push_back("--no-python-hook");
  if (!opt.facts) argv.push_back("--no-facts");
  if (opt.keep_argv) argv.push_back("--keep-argv");
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  std::vector<std::string> ours;
  for (char** e = environ; *e != nullptr; ++e) ours.emplace_back(*e);
  RunStopped(std::move(argv), std::move(ours), log, limit, &t);
  if (!t.why_not.empty()) return t;
  if (t.status == 127 && access(trace.c_str(), F_OK) != 0) {
    t.why_not = fmt::format("cannot run {}", text::Escape(self));
    return t;
  }
  store::TraceSet traces = store::LoadTraces({trace});
  if (!store::AnyReadable(traces)) {
    t.why_not = fmt::format("its trace could not be read (its output: {})", text::Escape(log));
    return t;
  }
  const v1::Timeline timeline = model::BuildTimeline(traces);
  const elf::TraceFacts facts = analysis::FactsOf(traces);
  t.report = analysis::Analyze(timeline, &facts);
  return t;
}

// A trial that failed on a load that fails only under ldscope's audit module says nothing
// of the change: the command runs again with it, untraced, and its exit status is the
// evidence (output in N.untraced.log).
void RunUntraced(const v1::Fix& x, const std::vector<std::string>& command, const std::string& dir, size_t n,
                 double limit, Trial* t) {
  for (const auto& g : t->report.findings())
    if (FailedOnlyTraced(g)) t->traced_only = &g;
  if (t->traced_only == nullptr) return;
  Trial u;
  std::vector<std::string> with;
  if (x.has_env()) with.push_back(text::Unescape(x.env().variable() + "=" + x.env().value()));
  RunStopped(command, UntracedEnv(with), fmt::format("{}/{}.untraced.log", dir, n), limit, &u);
  t->untraced_why_not =
      u.why_not.empty() && u.timed_out ? fmt::format("it was still running after {:.0f} s", limit) : u.why_not;
  t->untraced_status = u.status;
}

// A finding of the trial that the run without the change did not have, about one of f's
// objects, that says a load failed (an error, or a missing library: info for a failed
// dlopen): the change moved the failure rather than removing it. nullptr when none.
const v1::Finding* StandIn(const v1::Finding& f, const v1::Report& before, const v1::Report& trial) {
  std::vector<std::string> paths;
  for (const auto& o : f.objects()) paths.push_back(analysis::NormalPath(o.path()));
  for (const auto& g : trial.findings()) {
    if (g.severity() != v1::ERROR && g.kind() != v1::MISSING_LIBRARY) continue;
    const bool old = std::any_of(before.findings().begin(), before.findings().end(),
                                 [&](const v1::Finding& b) { return Subject(b) == Subject(g); });
    if (old) continue;
    for (const auto& o : g.objects())
      if (std::find(paths.begin(), paths.end(), analysis::NormalPath(o.path())) != paths.end()) return &g;
  }
  return nullptr;
}

// The verdict where the traced trial failed on a load only the audit module makes fail
// (Trial.traced_only): the untraced run with the change decides.
v1::Verification UntracedVerdict(const v1::Finding& f, const v1::Fix& x, const Trial& t, int original) {
  v1::Verification v;
  const v1::Finding& g = *t.traced_only;
  const std::string traced = fmt::format(
      "{} the {} error is gone; traced, the command then exits {} because {} fails to load only under "
      "ldscope's audit module (info {})",
      ChangeText(x), render::EnumWord(f.kind()), t.status,
      g.objects_size() > 0 ? text::BaseName(g.objects(0).path()) : std::string("unknown"), render::EnumWord(g.kind()));
  if (!t.untraced_why_not.empty()) {
    v.set_state(v1::VERIFY_UNTRIED);
    v.set_text(fmt::format("{}, and run untraced it did not finish: {}", traced, t.untraced_why_not));
  } else if (t.untraced_status == 0) {
    v.set_state(v1::VERIFY_CLEARED);
    v.set_text(fmt::format("{}; run untraced with the change, it exits {}", traced, t.untraced_status));
  } else {
    v.set_state(v1::VERIFY_NOT_CLEARED);
    v.set_text(fmt::format("{}; run untraced with the change, it exits {}{}", traced, t.untraced_status,
                           t.untraced_status == original ? " (as without the change)" : ""));
  }
  return v;
}

// The verdict of trial t on finding f of report before, fixed by x; original: the
// command's exit status.
v1::Verification Verdict(const v1::Finding& f, const v1::Report& before, const v1::Fix& x, const Trial& t,
                         int original) {
  v1::Verification v;
  if (!t.why_not.empty()) {
    v.set_state(v1::VERIFY_UNTRIED);
    v.set_text(ChangeText(x) + ", the command did not run: " + t.why_not);
    return v;
  }
  const std::string subject = Subject(f);
  bool still = false;
  for (const auto& g : t.report.findings()) still |= Subject(g) == subject && !FailedOnlyTraced(g);
  const std::string kind = render::EnumWord(f.kind());
  const std::string change = ChangeText(x);
  if (still) {
    v.set_state(v1::VERIFY_NOT_CLEARED);
    v.set_text(fmt::format("{} the {} finding stays", change, kind));
    return v;
  }
  if (const v1::Finding* g = StandIn(f, before, t.report); g != nullptr) {
    v.set_state(v1::VERIFY_NOT_CLEARED);
    v.set_text(fmt::format("{} the {} finding is gone, but a {} finding comes instead: {}", change, kind,
                           render::EnumWord(g->kind()), g->headline()));
    return v;
  }
  if (t.timed_out) {
    v.set_state(v1::VERIFY_CLEARED);
    v.set_text(
        fmt::format("{} the {} finding is gone; the command was still running after {:.0f} s and was "
                    "stopped",
                    change, kind, t.limit));
    return v;
  }
  if (t.traced_only != nullptr) return UntracedVerdict(f, x, t, original);
  // A command that failed and still fails the same way is not helped, whatever finding
  // went away.
  if (original != 0 && t.status == original) {
    v.set_state(v1::VERIFY_NOT_CLEARED);
    v.set_text(fmt::format("{} the {} finding is gone, but the command still exits {} (as without the change)", change,
                           kind, t.status));
    return v;
  }
  if (t.status == 0 || t.status == original) {
    v.set_state(v1::VERIFY_CLEARED);
    v.set_text(fmt::format("{} the {} finding is gone and the command exits {}", change, kind, t.status));
    return v;
  }
  // A command that now fails elsewhere may never reach the load the finding was about.
  v.set_state(v1::VERIFY_NOT_CLEARED);
  v.set_text(fmt::format("{} the command exits {} (without the change: {}), so the {} finding's absence proves nothing",
                         change, t.status, original, kind));
  return v;
}

}  // namespace

void TryFixes(const RunOptions& opt, int original_status, double original_seconds, v1::Report* report) {
  // The fixes to try, in the report's order; each distinct change once.
  std::vector<v1::Fix*> fixes;
  std::vector<const v1::Finding*> of;
  std::vector<std::string> changes;
  for (auto& f : *report->mutable_findings()) {
    if (f.severity() != v1::ERROR) continue;
    for (auto& x : *f.mutable_fixes()) {
      if (!EnvAction(x.action()) && !OrderAction(x.action())) continue;
      if (!(EnvAction(x.action()) && x.has_env()) && !(OrderAction(x.action()) && x.has_move())) {
        x.mutable_verified()->set_text("the fix names no single change to make");
        continue;
      }
      fixes.push_back(&x);
      of.push_back(&f);
      if (std::find(changes.begin(), changes.end(), ChangeKey(x)) == changes.end()) changes.push_back(ChangeKey(x));
    }
  }
  if (fixes.empty()) return;
  const Result<std::string> self = SelfExe();
  std::string why;
  std::string dir;
  if (!self.ok()) {
    why = self.error();
  } else if (Result<std::string> made = MakePrivateDir(TempRoot(), "ldscope-trials"); !made.ok()) {
    why = made.error();
  } else {
    dir = *made;
  }
  if (!why.empty()) {
    Complain("--try-fixes: " + why);
    for (auto* x : fixes) x->mutable_verified()->set_text(ChangeText(*x) + ", the command did not run: " + why);
    return;
  }
  const double limit = std::max(kMinTrialSeconds, std::ceil(2 * original_seconds));
  struct sigaction stop = {}, old_int = {}, old_term = {};
  stop.sa_handler = Stop;
  sigaction(SIGINT, &stop, &old_int);
  sigaction(SIGTERM, &stop, &old_term);
  std::map<std::string, Trial> trials;
  {
    Progress progress("run", "changes tried");
    progress.Count(0, changes.size());
    for (size_t i = 0; i < fixes.size(); ++i) {
      const v1::Fix& x = *fixes[i];
      const std::string key = ChangeKey(x);
      if (trials.count(key) != 0) continue;
      const size_t n = trials.size() + 1;
      Trial& t = trials[key];
      if (g_stop) {
        t.why_not = "ldscope was interrupted";
        continue;
      }
      std::vector<std::string> command;
      t.why_not = TrialCommand(opt.command, x, fmt::format("{}/{}.py", dir, n), &command);
      if (t.why_not.empty())
        t = RunTrial(opt, *self, x, command, fmt::format("{}/{}.ldscope", dir, n), fmt::format("{}/{}.log", dir, n),
                     limit);
      if (t.why_not.empty() && t.status != 0 && !t.timed_out) RunUntraced(x, command, dir, n, limit, &t);
      progress.Count(trials.size(), changes.size());
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  const int original = WIFEXITED(original_status)     ? WEXITSTATUS(original_status)
                       : WIFSIGNALED(original_status) ? 128 + WTERMSIG(original_status)
                                                      : 1;
  for (size_t i = 0; i < fixes.size(); ++i)
    *fixes[i]->mutable_verified() = Verdict(*of[i], *report, *fixes[i], trials[ChangeKey(*fixes[i])], original);
  Complain(fmt::format("--try-fixes: {} change{} tried; each run's trace and output are in {}", trials.size(),
                       trials.size() == 1 ? "" : "s", text::Escape(dir)));
}

}  // namespace ldscope::cli
