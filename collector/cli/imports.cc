// `ldscope imports [--python EXE] [-j N] [--fail-on WORDS] MODULE...`: which import
// orders are safe. Every permutation (up to 4 modules; beyond, every pair in both
// orders) runs in a fresh interpreter under `ldscope run`, N at a time; the matrix shows each order's outcome,
// duplicate libraries and shadowed dependencies, and a conclusion sentence per problem.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <atomic>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "ldscope_proto/imports.pb.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"

namespace ldscope::cli {
namespace {

constexpr char kMarker[] = "LDSCOPE_IMPORT_FAILED ";
constexpr char kMissing[] = "LDSCOPE_IMPORT_MISSING ";

// Imports the modules named in sys.argv in order (names are data, never source); the
// first failure is reported on one marked line, a module that does not exist at all
// (ModuleNotFoundError for itself or a parent package) on another.
std::string Program() {
  return fmt::format(
      "import sys\n"
      "for m in sys.argv[1:]:\n"
      "    try:\n"
      "        __import__(m)\n"
      "    except BaseException as e:\n"
      "        n = getattr(e, 'name', None) if isinstance(e, ModuleNotFoundError) else None\n"
      "        mark = '{}' if n and (m == n or m.startswith(n + '.')) else '{}'\n"
      "        sys.stderr.write('%s%s %s: %s\\n' % (mark, m, type(e).__name__, str(e).replace('\\n', ' ')))\n"
      "        sys.exit(1)\n",
      kMissing, kMarker);
}

// A dotted name of identifiers (ASCII letters, digits, '_', or non-ASCII UTF-8 bytes,
// which Python allows in identifiers; no part starts with a digit).
bool DottedName(const std::string& name) {
  bool part_start = true;
  for (const unsigned char c : name) {
    if (c == '.') {
      if (part_start) return false;
      part_start = true;
      continue;
    }
    const bool ident = std::isalpha(c) || c == '_' || c >= 0x80 || (!part_start && std::isdigit(c));
    if (!ident) return false;
    part_start = false;
  }
  return !part_start;
}

// The interpreter's path (a bare name looked up on PATH, as a shell does), or why it
// cannot be run.
Result<std::string> FindInterpreter(const std::string& python) {
  std::string path = python;
  if (python.find('/') == std::string::npos) {
    const char* env = std::getenv("PATH");
    const std::string dirs = env != nullptr ? env : "/usr/bin:/bin";
    path.clear();
    for (size_t at = 0; at <= dirs.size();) {
      const size_t end = std::min(dirs.find(':', at), dirs.size());
      const std::string c = (end > at ? dirs.substr(at, end - at) : ".") + "/" + python;
      if (access(c.c_str(), X_OK) == 0) {
        path = c;
        break;
      }
      at = end + 1;
    }
    if (path.empty()) return Error{fmt::format("the interpreter {} is not on PATH", python)};
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return Error{fmt::format("the interpreter {}: {}", python, std::strerror(errno))};
  if (!S_ISREG(st.st_mode) || access(path.c_str(), X_OK) != 0)
    return Error{fmt::format("the interpreter {} is not an executable file", python)};
  return path;
}

// Runs argv, returning its exit status (an error when it could not be started) and its
// stderr.
Result<int> Capture(const std::vector<std::string>& argv, std::string* err) {
  // Made before the fork: the child of a threaded process (-j) may not allocate.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Error{fmt::format("cannot make a pipe: {}", std::strerror(errno))};
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(pipefd[0]);
    close(pipefd[1]);
    return Error{fmt::format("cannot start {}: {}", argv[0], std::strerror(e))};
  }
  if (pid == 0) {
    dup2(pipefd[1], 2);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipefd[1]);
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) err->append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::vector<std::vector<std::string>> Orders(std::vector<std::string> modules) {
  std::vector<std::vector<std::string>> out;
  if (modules.size() <= 4) {
    std::vector<size_t> idx(modules.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    do {
      std::vector<std::string> o;
      for (size_t i : idx) o.push_back(modules[i]);
      out.push_back(o);
    } while (std::next_permutation(idx.begin(), idx.end()));
  } else {
    for (size_t i = 0; i < modules.size(); ++i)
      for (size_t j = 0; j < modules.size(); ++j)
        if (i != j) out.push_back({modules[i], modules[j]});
  }
  return out;
}

template <class Range>
std::string JoinWith(const Range& v, const char* sep) {
  return fmt::format("{}", fmt::join(v, sep));
}

std::string Short(const v1::Finding& f) { return f.headline() + "."; }

// The modules are named, each a dotted name, and the interpreter exists; false
// (complained) when not.
bool CheckArguments(const ImportsOptions& opt) {
  if (opt.modules.empty()) {
    Complain("imports: name at least one module");
    return false;
  }
  for (const auto& m : opt.modules)
    if (!DottedName(m)) {
      Complain(fmt::format("imports: '{}' is not a module name (dotted Python identifiers, "
                           "like os.path)", m));
      return false;
    }
  if (opt.jobs < 1) {
    Complain(fmt::format("imports: -j {}: run at least one order at a time", opt.jobs));
    return false;
  }
  return true;
}

// The program's marked line on stderr ("MARKER module Type: message"): the module and
// what follows it.
struct MarkedLine {
  bool found = false;
  std::string module;
  std::string message;
};
MarkedLine FindMarked(const std::string& err, const char* marker) {
  MarkedLine out;
  const size_t len = std::strlen(marker);
  const auto at = err.find(marker);
  if (at == std::string::npos) return out;
  const std::string line = err.substr(at + len, err.find('\n', at) - at - len);
  const auto sp = line.find(' ');
  out.found = true;
  out.module = line.substr(0, sp);
  out.message = sp == std::string::npos ? "" : line.substr(sp + 1);
  return out;
}

// The findings of warning severity and above in an order's trace.
void AddFindings(const std::string& trace, v1::OrderResult* r) {
  const store::TraceSet traces = store::LoadTracesIndexed({trace});
  const elf::TraceFacts facts = analysis::FactsOf(traces);
  const v1::Report findings = analysis::Analyze(model::BuildTimeline(traces), &facts);
  for (const auto& f : findings.findings())
    if (f.severity() >= v1::WARNING) *r->add_findings() = f;
}

// One order's run: its exit status and stderr (or why it could not start).
struct OrderRun {
  std::vector<std::string> modules;
  std::string trace;
  Result<int> ran = Error{"not run"};
  std::string err;
};

// Runs every order, opt.jobs at a time, each in a fresh interpreter under `ldscope
// run`; on a terminal, stderr shows how many are done.
std::vector<OrderRun> RunAll(const ImportsOptions& opt, const std::string& python, const std::string& self,
                             const std::string& dir) {
  std::vector<OrderRun> runs;
  for (auto& order : Orders(opt.modules)) {
    OrderRun& r = runs.emplace_back();
    r.modules = std::move(order);
    r.trace = fmt::format("{}/{}.ldscope", dir, runs.size() - 1);
  }
  Progress progress("imports", "orders run");
  std::atomic<size_t> next{0}, done{0};
  const auto work = [&] {
    for (size_t i; (i = next++) < runs.size();) {
      OrderRun& r = runs[i];
      std::vector<std::string> argv = {self, "run", "-q", "--no-report", "-o", r.trace, "--", python, "-c", Program()};
      argv.insert(argv.end(), r.modules.begin(), r.modules.end());
      r.ran = Capture(argv, &r.err);
      progress.Count(++done, runs.size());
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < opt.jobs && static_cast<size_t>(t) < runs.size(); ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return runs;
}

// Runs each order in a fresh traced interpreter and adds its outcome and findings to
// rep (in the orders' order, whatever order they ran in). False (complained) when a
// module does not exist at all: no order can tell anything then. The traces are
// removed, and dir with them.
bool RunOrders(const ImportsOptions& opt, const std::string& python, const std::string& self, const std::string& dir,
               v1::ImportsReport* rep) {
  const std::vector<OrderRun> runs = RunAll(opt, python, self, dir);
  bool ok = true;
  for (const OrderRun& run : runs) {
    if (!ok) {
      unlink(run.trace.c_str());
      continue;
    }
    if (!run.ran.ok()) {
      Complain("imports: " + run.ran.error());
      ok = false;
    } else if (const MarkedLine missing = FindMarked(run.err, kMissing); missing.found) {
      Complain(fmt::format("imports: module {} not found by {} ({})", missing.module, python, missing.message));
      ok = false;
    }
    if (!ok) {
      unlink(run.trace.c_str());
      continue;
    }
    v1::OrderResult* r = rep->add_orders();
    for (const auto& m : run.modules) r->add_modules(m);
    r->set_ok(*run.ran == 0);
    if (const MarkedLine failed = FindMarked(run.err, kMarker); failed.found) {
      r->set_failed_module(failed.module);
      r->set_error(failed.message);
    } else if (*run.ran != 0) {
      r->set_error(fmt::format("exit status {}", *run.ran));
    }
    AddFindings(run.trace, r);
    unlink(run.trace.c_str());
  }
  rmdir(dir.c_str());
  return ok;
}

// Whether the report matches a --fail-on word: a finding of any order does, and an
// order that fails matches "error", "warning" and "any".
bool FailsOn(const v1::ImportsReport& rep, const std::vector<std::string>& words) {
  for (const auto& w : words)
    for (const auto& r : rep.orders()) {
      if (!r.ok() && (w == "error" || w == "warning" || w == "any")) return true;
      for (const auto& f : r.findings())
        if (FailOnMatches(f, w)) return true;
    }
  return false;
}

// Conclusions: one sentence per order that fails or that loads a library twice.
void Conclude(v1::ImportsReport* rep) {
  for (const auto& r : rep->orders()) {
    const std::string order = JoinWith(r.modules(), " before ");
    if (!r.ok()) {
      std::string why;
      for (const auto& f : r.findings())
        if (f.kind() == v1::MISSING_SYMBOL) why = Short(f);
      rep->add_conclusions(fmt::format("importing {} breaks {}: {}", order, r.failed_module(),
                                       why.empty() ? r.error() : why));
      continue;
    }
    for (const auto& f : r.findings()) {
      if (f.kind() != v1::DUPLICATE_LIBRARY) continue;
      std::vector<std::string> copies;
      for (const auto& o : f.objects()) copies.push_back(analysis::Label(o));
      rep->add_conclusions(fmt::format("{} works but loads {} copies of {}: {}", order,
                                       f.objects_size() == 2 ? "two" : std::to_string(f.objects_size()),
                                       f.objects(0).soname(), JoinWith(copies, " and ")));
    }
  }
}

// The matrix (an order a line: outcome, finding kinds) and the conclusions.
std::string ImportsText(const v1::ImportsReport& rep) {
  std::string out = fmt::format("{:<40} {:<8} {}\n", "order", "outcome", "findings");
  for (const auto& r : rep.orders()) {
    std::vector<std::string> kinds;
    for (const auto& f : r.findings()) kinds.push_back(render::FindingKindName(f.kind()));
    const std::string fs = JoinWith(kinds, ", ");
    out += fmt::format("{:<40} {:<8} {}\n", JoinWith(r.modules(), ", "),
                       r.ok() ? "ok" : "FAILED", fs.empty() ? "-" : fs);
    if (!r.ok()) out += fmt::format("{:<40} {}\n", "", fmt::format("{}: {}", r.failed_module(), r.error()));
  }
  out += "\n";
  if (rep.conclusions_size() == 0) out += "Every order works and loads no library twice.\n";
  for (const auto& c : rep.conclusions()) out += "- " + c + "\n";
  return out;
}

}  // namespace

int Imports(const ImportsOptions& opt) {
  if (!CheckArguments(opt)) return kUsage;
  const Result<std::string> python = FindInterpreter(opt.python);
  if (!python.ok()) {
    Complain("imports: " + python.error());
    return kUsage;
  }
  // ldscope's own executable (each order runs under `ldscope run`), and a fresh
  // directory for the orders' traces.
  const Result<std::string> self = SelfExe();
  if (!self.ok()) {
    Complain("imports: " + self.error());
    return kUsage;
  }
  const Result<std::string> dir = MakePrivateDir(TempRoot(), "ldscope-imports");
  if (!dir.ok()) {
    Complain("imports: " + dir.error());
    return kUsage;
  }
  v1::ImportsReport rep;
  rep.set_python(*python);
  if (!RunOrders(opt, *python, *self, *dir, &rep)) return kUsage;
  Conclude(&rep);
  const std::string out = opt.format == "json" ? render::Json(rep) : ImportsText(rep);
  if (!Print(stdout, out)) return kWriteFailed;
  return FailsOn(rep, opt.fail_on) ? kFindings : kOk;
}

}  // namespace ldscope::cli
