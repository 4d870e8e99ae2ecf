// See canonical.h.
#include "support/canonical.h"

#include <regex>
#include <utility>
#include <vector>

#include "support/hwcaps.h"
#include "support/test_support.h"

namespace ldscope::testing {
namespace {

struct Rule {
  std::regex pattern;
  const char* replacement;
};

// Each rule once, in order: a later one may rely on an earlier one's placeholder.
const std::vector<Rule>& Rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<std::pair<const char*, const char*>> text = {
        // One machine's Python, shell and coreutils; the multiarch triplet.
        {R"re(python3\.[0-9]+)re", "python3.X"},
        {R"re(cpython-3[0-9]+)re", "cpython-3X"},
        {R"re(python3_[0-9]+)re", "python3_X"},
        // Its version and wheel tag, as missing-symbol findings about a Python name say them.
        {R"re(Python 3\.[0-9]+\.[0-9]+)re", "Python 3.X.Y"},
        {R"re("pythonVersion": "3\.[0-9]+\.[0-9]+")re", R"re("pythonVersion": "3.X.Y")re"},
        {R"re(\(tag cp3[0-9]+\))re", "(tag cp3X)"},
        {R"re((/usr)?/bin/(dash|bash|sh)(?=[/"'\s:,;)\]]|$))re", "${SHELL}"},
        {R"re((/usr)?/bin/true(?=[/"'\s:,;)\]]|$))re", "${BIN}/true"},
        {R"re(\bldscope\.(dash|bash)\b)re", "ldscope.${SHELL}"},
        {R"re(/lib/(x86_64|aarch64|i386)-linux-gnu(?=[/"'\s:,;)\]]|$))re", "/lib/${MULTIARCH}"},
        // The CPU mask of scripts/test's second golden run, which a fix that sets
        // GLIBC_TUNABLES keeps in front of its own tunable.
        {R"re(glibc\.cpu\.hwcaps=[-+A-Za-z0-9_,]*:)re", ""},
        // Pids, times and ids of one run, as the text and JSON reports, the GitHub
        // step summary and the Chrome export write them.
        {R"re(process(:?) [0-9]+)re", "process$1 ${PID}"},
        {R"re(\+[0-9]+\.[0-9] ms)re", "+T ms"},
        {R"re("pid": [0-9]+)re", R"re("pid": 0)re"},
        {R"re("seq": "[0-9]+")re", R"re("seq": "0")re"},
        {R"re("(seq|atMs)": [0-9.e-]+)re", R"re("$1": 0)re"},
        {R"re("buildId": "[0-9a-f]+")re", R"re("buildId": "")re"},
        {R"re("ldscopeVersion": "[^"]*")re", R"re("ldscopeVersion": "${VERSION}")re"},
        // Which import of the process it was: how many imports came first depends on
        // the interpreter's caches; 0 (none) stays.
        {R"re("importIndex": [1-9][0-9]*)re", R"re("importIndex": 1)re"},
        {R"re("evidence": \[[^\]]*\])re", R"re("evidence": [])re"},
        {R"re(\| [0-9]+ )re", "| ${PID} "},
        {R"re("(tid|ts|dur)": [0-9.e+-]+)re", R"re("$1": 0)re"},
        {R"re("name": "[0-9]+ )re", R"re("name": "${PID} )re"},
        {R"re("thread [0-9]+")re", R"re("thread ${TID}")re"},
    };
    std::vector<Rule> out;
    for (const auto& [p, r] : text) out.push_back({std::regex(p), r});
    return out;
  }();
  return rules;
}

// The build tree's paths, longest first so that a path inside another is replaced as
// itself (the scratch root before the fixtures' parent, say).
const std::vector<std::pair<std::string, std::string>>& Paths() {
  static const std::vector<std::pair<std::string, std::string>> paths = {
      {AUDIT_LIB, "${AUDIT_LIB}"}, {DLPROBE, "${DLPROBE}"},         {PYTHON_HOOK_DIR, "${PYTHON_HOOK}"},
      {FIXTURES, "${FIXTURES}"},   {SCENARIOS_DIR, "${SCENARIOS}"}, {PYFIXTURES_DIR, "${PYFIXTURES}"},
  };
  return paths;
}

}  // namespace

std::string Canonicalise(const std::string& text) {
  std::string s = NormaliseHwcaps(text);
  // A test's scratch directory is TEST_SCRATCH_ROOT/NAME (ScratchDir).
  static const std::regex scratch(
      std::regex_replace(TEST_SCRATCH_ROOT, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + R"(/[^/\s"':,)]+)");
  s = std::regex_replace(s, scratch, "${SCRATCH}");
  for (const auto& [path, name] : Paths()) s = ReplaceAll(s, path, name);
  for (const auto& rule : Rules()) s = std::regex_replace(s, rule.pattern, rule.replacement);
  return s;
}

}  // namespace ldscope::testing
