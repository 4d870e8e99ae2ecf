// The goldens hold on every x86-64 CPU: the hwcaps subdirectories glibc tries (which
// depend on the CPU and the glibc version) are normalised there, and checked here
// instead, exactly, against what glibc itself says it tried in the same run.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "store/trace_file.h"
#include "support/canonical.h"
#include "support/hwcaps.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

// The candidate lists glibc produces for one searched directory on various machines,
// best first, the directory itself excluded. 2.36's legacy lists are every
// combination of "tls", the platform and the important hwcaps, as `ld.so --help`
// lists them; 2.37 dropped the legacy ones.
struct Cpu {
  const char* what;
  std::vector<std::string> subdirs;
};

const std::vector<Cpu>& Cpus() {
  static const std::vector<Cpu> cpus = {
      {"glibc 2.36, AMD EPYC (platform x86_64)",
       {"glibc-hwcaps/x86-64-v4", "glibc-hwcaps/x86-64-v3", "glibc-hwcaps/x86-64-v2",
        "tls/x86_64/x86_64", "tls/x86_64", "tls/x86_64", "tls", "x86_64/x86_64", "x86_64",
        "x86_64"}},
      {"glibc 2.36, Intel Xeon with AVX-512 (platform haswell, hwcap avx512_1)",
       {"glibc-hwcaps/x86-64-v4", "glibc-hwcaps/x86-64-v3", "glibc-hwcaps/x86-64-v2",
        "tls/haswell/avx512_1/x86_64", "tls/haswell/avx512_1", "tls/haswell/x86_64",
        "tls/haswell", "tls/avx512_1/x86_64", "tls/avx512_1", "tls/x86_64", "tls",
        "haswell/avx512_1/x86_64", "haswell/avx512_1", "haswell/x86_64", "haswell",
        "avx512_1/x86_64", "avx512_1", "x86_64"}},
      {"glibc 2.36, Intel Xeon Phi (platform xeon_phi, hwcap avx512_1)",
       {"glibc-hwcaps/x86-64-v4", "glibc-hwcaps/x86-64-v3", "glibc-hwcaps/x86-64-v2",
        "tls/xeon_phi/avx512_1/x86_64", "tls/xeon_phi/avx512_1", "tls/xeon_phi/x86_64",
        "tls/xeon_phi", "tls/avx512_1/x86_64", "tls/avx512_1", "tls/x86_64", "tls",
        "xeon_phi/avx512_1/x86_64", "xeon_phi/avx512_1", "xeon_phi/x86_64", "xeon_phi",
        "avx512_1/x86_64", "avx512_1", "x86_64"}},
      {"glibc 2.36, aarch64 (platform aarch64)", {"tls/aarch64", "tls", "aarch64"}},
      {"glibc 2.36, x86-64-v2 CPU without AVX", {"glibc-hwcaps/x86-64-v2", "tls/x86_64",
                                                  "tls", "x86_64"}},
      {"glibc 2.41, x86-64-v3 CPU", {"glibc-hwcaps/x86-64-v3", "glibc-hwcaps/x86-64-v2"}},
      {"glibc 2.41, baseline x86-64 CPU", {}},
  };
  return cpus;
}

// The golden as `show` would print it on that machine: each placeholder line expanded
// into the machine's candidates, the event count raised by as many search events.
std::string AsOn(const std::string& golden, const Cpu& cpu) {
  static const std::regex placeholder(R"((.*tried  .{16} )(.*)/\$\{HWCAPS\}/(.*))");
  static const std::regex events(R"(^  events (\d+) \+ \$\{HWCAPS\}(.*))");
  std::stringstream in(golden);
  std::string out, line;
  size_t added = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, placeholder)) {
      for (const auto& sub : cpu.subdirs) out += m[1].str() + m[2].str() + "/" + sub + "/" + m[3].str() + "\n";
      added += cpu.subdirs.size();
    } else if (std::regex_match(line, m, events)) {
      out += "  events " + std::to_string(std::stoul(m[1]) + added) + m[2].str() + "\n";
      added = 0;
    } else {
      out += line + "\n";
    }
  }
  return out;
}

TEST(Hwcaps, TracerGoldenHoldsOnEveryCpu) {
  const std::string golden = testing::ReadFile(GOLDEN_DIR "/show_dlprobe.txt");
  ASSERT_NE(golden.find("/${HWCAPS}/libfix_b.so"), std::string::npos) << "the golden searches a directory";
  for (const auto& cpu : Cpus()) {
    const std::string shown = AsOn(golden, cpu);
    if (!cpu.subdirs.empty()) {
      EXPECT_NE(shown.find("/" + cpu.subdirs.back() + "/libfix_b.so"), std::string::npos) << cpu.what;
    }
    EXPECT_EQ(testing::NormaliseHwcaps(shown), golden) << cpu.what << ":\n" << shown;
    // What ExpectGolden compares: the same.
    EXPECT_EQ(testing::Canonicalise(shown), golden) << cpu.what << ":\n" << shown;
    EXPECT_EQ(testing::Canonicalise(golden), golden) << "canonical text is its own canonical form";
  }
}

// Normalising hides only the hwcaps subdirectories: another directory, another step,
// another order or a missing candidate still shows.
TEST(Hwcaps, NormalisingHidesNothingElse) {
  const std::string golden = testing::ReadFile(GOLDEN_DIR "/show_dlprobe.txt");
  const std::string amd = AsOn(golden, Cpus()[0]);
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"/lib/tls/x86_64/x86_64/libfix_b.so", "/lib/lib64/libfix_b.so"},
      {"RUNPATH          ${FIXTURES}/lib/glibc-hwcaps/x86-64-v4", "RPATH            ${FIXTURES}/lib/glibc-hwcaps/x86-64-v4"},
      {"tried  RUNPATH          ${FIXTURES}/lib/libfix_b.so\n", ""},
      {"events 45,", "events 46,"},
  };
  for (const auto& [from, to] : edits) {
    ASSERT_NE(amd.find(from), std::string::npos) << from;
    EXPECT_NE(testing::NormaliseHwcaps(testing::ReplaceAll(amd, from, to)), golden) << from << " -> " << to;
  }
}

// Each machine- or run-dependent piece ExpectGolden replaces, and what it leaves alone.
TEST(Canonical, MachineBuildTreeAndRun) {
  const std::string scratch = std::string(TEST_SCRATCH_ROOT) + "/some_test";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"process: 4711 (/usr/bin/python3.11)", "process: ${PID} (/usr/bin/python3.X)"},
      {"_ctypes.cpython-311-x86_64-linux-gnu.so", "_ctypes.cpython-3X-x86_64-linux-gnu.so"},
      {"/usr/bin/dash -c x; /bin/bash; /bin/sh", "${SHELL} -c x; ${SHELL}; ${SHELL}"},
      {"/usr/bin/true /bin/true /bin/truex", "${BIN}/true ${BIN}/true /bin/truex"},
      {"/lib/x86_64-linux-gnu/libc.so.6 /usr/lib/aarch64-linux-gnu/",
       "/lib/${MULTIARCH}/libc.so.6 /usr/lib/${MULTIARCH}/"},
      {scratch + "/t.ldscope \"" + scratch + "\"", "${SCRATCH}/t.ldscope \"${SCRATCH}\""},
      {std::string(FIXTURES) + "/lib/libfix_a.so " + DLPROBE + " " + AUDIT_LIB,
       "${FIXTURES}/lib/libfix_a.so ${DLPROBE} ${AUDIT_LIB}"},
      {"\"pid\": 77, \"seq\": \"12\", \"buildId\": \"ab12\"", "\"pid\": 0, \"seq\": \"0\", \"buildId\": \"\""},
      {"+12.5 ms", "+T ms"},
      {"GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX2:glibc.rtld.optional_static_tls=896",
       "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=896"},
      // Not the machine's: kept.
      {"/usr/lib/x86_64-linux-gnu-extra /opt/python3/bin /bin/shx",
       "/usr/lib/x86_64-linux-gnu-extra /opt/python3/bin /bin/shx"},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(testing::Canonicalise(in), want) << in;
    EXPECT_EQ(testing::Canonicalise(want), want) << want;
  }
}

TEST(Hwcaps, SubdirectoryNames) {
  for (const char* yes : {"glibc-hwcaps/x86-64-v3", "glibc-hwcaps/power10", "tls", "x86_64",
                          "tls/haswell/avx512_1/x86_64", "xeon_phi", "aarch64"})
    EXPECT_TRUE(testing::IsHwcapsSubdir(yes)) << yes;
  for (const char* no : {"", "glibc-hwcaps", "glibc-hwcaps/", "glibc-hwcaps/a/b", "lib64",
                         "x86_64-linux-gnu", "tls/lib", "threads"})
    EXPECT_FALSE(testing::IsHwcapsSubdir(no)) << no;
}

// glibc's own account of the candidates it tried in namespace 0 (LD_DEBUG=libs), in order,
// in the processes of `pids` only (LD_DEBUG reaches ldscope itself too, and its own
// libraries' searches are no traced program's).
std::vector<std::string> GlibcTried(const std::string& dir, const std::set<uint32_t>& pids) {
  static const std::regex find(R"(^\s*\d+:\s+find library=.* \[(\d+)\]; searching$)");
  static const std::regex trying(R"(^\s*\d+:\s+trying file=(.*)$)");
  std::vector<std::string> tried;
  DIR* d = opendir(dir.c_str());
  while (dirent* de = d ? readdir(d) : nullptr) {
    const std::string name = de->d_name;
    if (name.rfind("dbg.", 0) != 0 || !pids.count(static_cast<uint32_t>(std::atoi(name.c_str() + 4)))) continue;
    std::ifstream f(dir + "/" + de->d_name);
    std::string line;
    bool ns0 = false;
    while (std::getline(f, line)) {
      std::smatch m;
      if (std::regex_match(line, m, find)) ns0 = m[1] == "0";
      else if (ns0 && std::regex_match(line, m, trying)) tried.push_back(m[1]);
    }
  }
  if (d) closedir(d);
  return tried;
}

// On whatever CPU runs the suite: every candidate ldscope recorded (hwcaps ones
// included, the directory searches of RUNPATH, LD_LIBRARY_PATH and the default dirs,
// ld.so.cache) is one glibc tried, in glibc's order, and nothing is missing.
TEST(Hwcaps, EveryCandidateIsOneGlibcTried) {
  const auto dir = testing::ScratchDir("hwcaps_candidates");
  const auto trace = dir + "/t.ldscope";
  const std::string fx = FIXTURES;
  auto r = testing::RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--", DLPROBE,
                            "open", fx + "/lib/libfix_a.so", "open", "libm.so.6", "open",
                            "libfix_t3.so", "open", "libfix_nowhere.so"},
                           {"LD_DEBUG=libs", "LD_DEBUG_OUTPUT=" + dir + "/dbg",
                            "LD_LIBRARY_PATH=/nonexistent:" + fx + "/lib/threads"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto t = store::ReadTraceFile(trace);
  ASSERT_TRUE(t.ok()) << t.problem->message;
  std::sort(t.events.begin(), t.events.end(),
            [](const v1::Event& a, const v1::Event& b) { return a.seq() < b.seq(); });
  std::vector<std::string> ours;
  std::set<uint32_t> pids;
  for (const auto& e : t.events) {
    if (e.has_search() && !e.search().candidate().empty()) ours.push_back(e.search().candidate());
    if (e.has_process_start()) pids.insert(e.pid());
  }
  const auto glibc = GlibcTried(dir, pids);
  EXPECT_EQ(ours, glibc);
  EXPECT_GE(glibc.size(), 8u) << "four searches, through two search steps and the cache";
}

}  // namespace
}  // namespace ldscope
