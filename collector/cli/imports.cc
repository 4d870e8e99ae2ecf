// `ldscope imports [--python EXE] MODULE...`: which import orders are safe. Every
// permutation (up to 4 modules; beyond, every pair in both orders) runs in a fresh
// interpreter under `ldscope run`; the matrix shows each order's outcome, duplicate
// libraries and shadowed dependencies, and a conclusion sentence per problem.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "ldscope_proto/imports.pb.h"
#include "model/timeline.h"
#include "render/render.h"
#include "store/trace_file.h"

namespace ldscope::cli {
namespace {

constexpr char kMarker[] = "LDSCOPE_IMPORT_FAILED ";

// Imports in order; the first failure is reported on one marked line.
std::string Program(const std::vector<std::string>& modules) {
  std::string list;
  for (const auto& m : modules) list += fmt::format("{}'{}'", list.empty() ? "" : ", ", m);
  return fmt::format(
      "import sys\n"
      "for m in [{}]:\n"
      "    try:\n"
      "        __import__(m)\n"
      "    except BaseException as e:\n"
      "        sys.stderr.write('{}%s %s: %s\\n' % (m, type(e).__name__, str(e).replace('\\n', ' ')))\n"
      "        sys.exit(1)\n",
      list, kMarker);
}

// Runs argv, returning its exit status and stderr.
int Capture(const std::vector<std::string>& argv, std::string* err) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 2);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipefd[1]);
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) err->append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
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

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string Short(const v1::Finding& f) {
  const std::string& m = f.message();
  const auto dot = m.find(". ");
  return dot == std::string::npos ? m : m.substr(0, dot + 1);
}

}  // namespace

int Imports(const ImportsOptions& opt) {
  if (opt.modules.empty()) {
    Complain("imports: name at least one module");
    return kUsage;
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return kUsage;
  self[n] = '\0';
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = fmt::format("{}/ldscope-imports-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir.data()) == nullptr) {
    Complain("cannot create a scratch directory in " + dir);
    return kUsage;
  }
  v1::ImportsReport rep;
  rep.set_python(opt.python);
  int k = 0;
  for (const auto& order : Orders(opt.modules)) {
    const std::string trace = fmt::format("{}/{}.ldscope", dir, k++);
    std::string err;
    const int rc = Capture({self, "run", "-q", "--no-report", "-o", trace, "--", opt.python, "-c",
                            Program(order)},
                           &err);
    v1::OrderResult* r = rep.add_orders();
    for (const auto& m : order) r->add_modules(m);
    r->set_ok(rc == 0);
    const auto at = err.find(kMarker);
    if (at != std::string::npos) {
      const std::string line = err.substr(at + sizeof kMarker - 1, err.find('\n', at) - at - sizeof kMarker + 1);
      const auto sp = line.find(' ');
      r->set_failed_module(line.substr(0, sp));
      r->set_error(sp == std::string::npos ? "" : line.substr(sp + 1));
    } else if (rc != 0) {
      r->set_error(fmt::format("exit status {}", rc));
    }
    const v1::Report findings = analysis::Analyze(model::BuildTimeline(store::LoadTraces({trace})));
    for (const auto& f : findings.findings())
      if (f.severity() >= v1::WARNING) *r->add_findings() = f;
    unlink(trace.c_str());
  }
  rmdir(dir.c_str());
  // Conclusions: one sentence per order that fails or that loads a library twice.
  for (const auto& r : rep.orders()) {
    const std::string order = Join({r.modules().begin(), r.modules().end()}, " before ");
    if (!r.ok()) {
      std::string why;
      for (const auto& f : r.findings())
        if (f.kind() == v1::MISSING_SYMBOL) why = Short(f);
      rep.add_conclusions(fmt::format("importing {} breaks {}: {}", order, r.failed_module(),
                                      why.empty() ? r.error() : why));
      continue;
    }
    for (const auto& f : r.findings()) {
      if (f.kind() != v1::DUPLICATE_LIBRARY) continue;
      std::vector<std::string> copies;
      for (const auto& o : f.objects()) copies.push_back(analysis::Label(o));
      rep.add_conclusions(fmt::format("{} works but loads {} copies of {}: {}", order,
                                      f.objects_size() == 2 ? "two" : std::to_string(f.objects_size()),
                                      f.objects(0).soname(), Join(copies, " and ")));
    }
  }
  if (opt.format == "json") {
    std::fputs(render::Json(rep).c_str(), stdout);
    return kOk;
  }
  std::string out = fmt::format("{:<40} {:<8} {}\n", "order", "outcome", "findings");
  for (const auto& r : rep.orders()) {
    std::string fs;
    for (const auto& f : r.findings()) fs += (fs.empty() ? "" : ", ") + render::FindingKindName(f.kind());
    out += fmt::format("{:<40} {:<8} {}\n", Join({r.modules().begin(), r.modules().end()}, ", "),
                       r.ok() ? "ok" : "FAILED", fs.empty() ? "-" : fs);
    if (!r.ok()) out += fmt::format("{:<40} {}\n", "", fmt::format("{}: {}", r.failed_module(), r.error()));
  }
  out += "\n";
  if (rep.conclusions_size() == 0) out += "Every order works and loads no library twice.\n";
  for (const auto& c : rep.conclusions()) out += "- " + c + "\n";
  std::fputs(out.c_str(), stdout);
  return kOk;
}

}  // namespace ldscope::cli
