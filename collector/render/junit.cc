// JUnit XML for CI systems that show test results from it (GitLab, Jenkins, Buildkite,
// Azure Pipelines): a test suite per traced program, a test case per process.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "render/render.h"
#include "text/strings.h"

namespace ldscope::render {
namespace {

// Length of the valid UTF-8 sequence at s[i] (1-4) that XML 1.0 allows, or 0.
size_t Utf8Char(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(k) & 0xC0) != 0x80) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (b(k) & 0x3F);
  const bool shortest = (n == 3 && cp >= 0x800) || (n == 4 && cp >= 0x10000) || n == 2;
  const bool allowed = cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE &&
                       cp != 0xFFFF;
  return shortest && allowed ? n : 0;
}

// XML text or attribute content. The model's text is already escaped (control
// characters as \n, \xNN); anything XML still forbids (other control characters,
// invalid UTF-8, from older traces) is written as \xNN the same way. In attributes,
// newlines and tabs become character references so that readers keep them.
std::string Xml(const std::string& s, bool attribute) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8Char(s, i);
      if (n == 0) {
        out += fmt::format("\\x{:02x}", c);
        ++i;
      } else {
        out.append(s, i, n);
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Attr(const std::string& s) { return Xml(s, true); }

// Jenkins splits a classname at its last '.' into package and class: keep the dots
// of "python3.11" out of it.
std::string ClassName(const std::string& exe) {
  std::string base = text::BaseName(exe);
  std::replace(base.begin(), base.end(), '.', '_');
  return "ldscope." + (base.empty() ? std::string("unknown") : base);
}

std::string CommandLine(const v1::ProcessTimeline& p) { return text::CommandLine(p.argv(), p.exe()); }

// How long the trace saw the process: its last event, or the end of its last import.
double Seconds(const v1::ProcessTimeline& p) {
  uint64_t ns = 0;
  for (const auto& e : p.entries()) ns = std::max<uint64_t>(ns, e.offset_ns());
  for (const auto& i : p.imports()) ns = std::max<uint64_t>(ns, i.end_offset_ns());
  return static_cast<double>(ns) / 1e9;
}

// The first variable of names the process was started with, or "".
std::string FirstEnv(const v1::ProcessTimeline& p, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (auto it = p.env().find(n); it != p.env().end() && !it->second.empty()) return it->second;
  return "";
}

std::string Properties(const v1::ProcessTimeline& p, const std::string& trace) {
  std::vector<std::pair<std::string, std::string>> props = {
      {"pid", std::to_string(p.pid())}, {"ppid", std::to_string(p.ppid())}};
  const std::string rank = FirstEnv(p, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"});
  if (!rank.empty()) props.emplace_back("rank", rank);
  const std::string local = FirstEnv(p, {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"});
  if (!local.empty()) props.emplace_back("local_rank", local);
  if (!trace.empty()) props.emplace_back("trace", trace);
  std::string out = "      <properties>\n";
  for (const auto& [name, value] : props)
    out += fmt::format("        <property name=\"{}\" value=\"{}\"/>\n", name, Attr(value));
  return out + "      </properties>\n";
}

// The finding as the text report prints it, then the objects and symbols it names.
std::string Evidence(const v1::Finding& f) {
  std::string out = FindingText(f);
  for (const auto& o : f.objects())
    out += fmt::format("  object: {}{}\n", o.path(), o.version().empty() ? "" : " (" + o.version() + ")");
  for (const auto& m : f.missing()) {
    out += fmt::format("  missing: {}{} needed by {}", m.name(),
                       m.version().empty() ? "" : "@" + m.version(), m.needed_by());
    if (!m.bound_to().empty()) out += ", bound to " + m.bound_to();
    if (!m.provider().empty()) out += ", defined by " + m.provider();
    out += "\n";
  }
  return out;
}

struct Case {
  const v1::ProcessTimeline* process;
  std::vector<const v1::Finding*> failures, others;
  std::string name;  // stable across runs: no pid (Names)
};

// Each case's name: the command line, with the rank where the process has one, and
// " #N" for the Nth process of the same name in the trace's order. Nothing that changes
// from run to run (pids, times): CI history follows a case by its name.
void Names(std::vector<Case>* cases) {
  std::map<std::string, int> seen;
  for (auto& c : *cases) {
    const auto& p = *c.process;
    std::string name = CommandLine(p);
    const std::string rank = FirstEnv(p, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"});
    if (!rank.empty()) name += " (rank " + rank + ")";
    const int n = ++seen[name];
    c.name = n == 1 ? name : fmt::format("{} #{}", name, n);
  }
}

std::string TestCase(const Case& c, const std::string& trace) {
  const auto& p = *c.process;
  std::string out = fmt::format("    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3f}\">\n",
                                Attr(c.name), Attr(ClassName(p.exe())), Seconds(p));
  out += Properties(p, trace);
  if (!c.failures.empty()) {
    const auto& first = *c.failures.front();
    std::string message = first.headline();
    if (c.failures.size() > 1) message += fmt::format(" (and {} more)", c.failures.size() - 1);
    std::string body;
    for (const auto* f : c.failures) body += Evidence(*f);
    out += fmt::format("      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                       FindingKindName(first.kind()), Attr(message), Xml(body, false));
  }
  if (!c.others.empty()) {
    std::string body;
    for (const auto* f : c.others) body += Evidence(*f);
    out += fmt::format("      <system-out>{}</system-out>\n", Xml(body, false));
  }
  return out + "    </testcase>\n";
}

// Findings per process: by stream where the finding names one, else by pid and exe.
std::vector<Case> Cases(const v1::Timeline& t, const v1::Report& r, const JunitInput& in) {
  std::vector<Case> cases;
  for (const auto& p : t.processes()) cases.push_back({&p, {}, {}, ""});
  for (const auto& f : r.findings()) {
    for (auto& c : cases) {
      const bool same = f.stream() != 0 ? f.stream() == c.process->stream()
                                        : f.pid() == c.process->pid() && f.exe() == c.process->exe();
      if (!same) continue;
      (in.fails && in.fails(f) ? c.failures : c.others).push_back(&f);
      break;
    }
  }
  Names(&cases);
  return cases;
}

// Trace damage: a suite of its own, one error per problem.
std::string ProblemSuite(const v1::Timeline& t) {
  std::string out = fmt::format(
      "  <testsuite name=\"ldscope traces\" tests=\"{0}\" failures=\"0\" errors=\"{0}\" "
      "skipped=\"0\" time=\"0.000\">\n", t.problems_size());
  for (const auto& p : t.problems()) {
    const std::string what = text::DamageText(p.file(), p.offset(), p.message());
    out += fmt::format(
        "    <testcase name=\"{}\" classname=\"ldscope.trace\" time=\"0.000\">\n"
        "      <error type=\"damaged-trace\" message=\"{}\"/>\n    </testcase>\n",
        Attr(p.file().empty() ? std::string("trace") : p.file()), Attr(what));
  }
  return out + "  </testsuite>\n";
}

}  // namespace

std::string Junit(const v1::Timeline& model, const v1::Report& r, const JunitInput& in) {
  const v1::Timeline t = ShownTimeline(model);
  const std::vector<Case> cases = Cases(t, r, in);
  // Suites in the order their program first appears.
  std::vector<std::string> exes;
  for (const auto& c : cases)
    if (std::find(exes.begin(), exes.end(), c.process->exe()) == exes.end())
      exes.push_back(c.process->exe());
  std::string suites;
  size_t tests = 0, failures = 0;
  double total = 0;
  for (const auto& exe : exes) {
    std::string body;
    size_t n = 0, failed = 0;
    double seconds = 0;
    for (const auto& c : cases) {
      if (c.process->exe() != exe) continue;
      const auto it = in.trace_of_stream.find(c.process->stream());
      body += TestCase(c, it == in.trace_of_stream.end() ? "" : it->second);
      ++n;
      failed += !c.failures.empty();
      seconds += Seconds(*c.process);
    }
    std::string notes;
    for (const auto& note : r.notes()) notes += "note: " + note + "\n";
    if (!notes.empty()) body += fmt::format("    <system-out>{}</system-out>\n", Xml(notes, false));
    suites += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
                          "skipped=\"0\" time=\"{:.3f}\">\n{}  </testsuite>\n",
                          Attr(exe.empty() ? std::string("unknown program") : exe), n, failed,
                          seconds, body);
    tests += n;
    failures += failed;
    total += seconds;
  }
  if (t.problems_size() > 0) suites += ProblemSuite(t);
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<testsuites name=\"ldscope\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
                     "time=\"{:.3f}\">\n{}</testsuites>\n",
                     tests + t.problems_size(), failures, t.problems_size(), total, suites);
}

}  // namespace ldscope::render
