// The aarch64 release artifacts as users install them (tests/dist_aarch64.sh: the
// tarball unpacked and moved, the wheel installed by pip for manylinux_2_28_aarch64,
// the .deb unpacked), each one's ldscope tracing Debian bookworm's arm64 python3 under
// qemu-user: `import json, ctypes`, with the loads tied to the Python lines that made
// them, and the report, against a golden file (the same for all three).
//
// This machine cannot start an arm64 program by itself (no binfmt_misc handler), so
// the traced command is qemu-aarch64-static running python3 (a static qemu: the host's
// loader never sees LD_AUDIT, the arm64 ld.so does); QEMU_LD_PREFIX makes the arm64
// tree the / in which both ldscope and python3 look for libraries.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kRoot = AARCH64_PYTHON_ROOT "/root";
const std::string kInstalls = DIST_AARCH64;

struct Install {
  std::string name, ldscope, audit, hook;
};

std::vector<Install> Installs() {
  const auto& s = kInstalls;
  return {{"tarball", s + "/tarball/bin/ldscope", s + "/tarball/lib/ldscope/libldscope_audit.so",
           s + "/tarball/share/ldscope/python"},
          {"wheel", s + "/wheel/ldscope/data/bin/ldscope", s + "/wheel/ldscope/data/lib/ldscope/libldscope_audit.so",
           s + "/wheel/ldscope/data/share/ldscope/python"},
          {"deb", s + "/deb/usr/bin/ldscope", s + "/deb/usr/lib/ldscope/libldscope_audit.so",
           s + "/deb/usr/share/ldscope/python"}};
}

const std::vector<std::string> kEnv = {"QEMU_LD_PREFIX=" + kRoot};

std::string Site(const v1::SourceLine& s) { return fmt::format("{}:{}", s.file(), s.line()); }

// The process's loads, one a line, each with what Python was doing when it happened.
std::string Loads(const v1::ProcessTimeline& p) {
  std::string out;
  for (const auto& e : p.entries()) {
    if (!e.has_load()) continue;
    const auto& l = e.load();
    out += fmt::format("{} {} -> {}", v1::LoadReason_Name(l.reason()), l.requested_name(), l.object().path());
    if (l.has_python()) {
      const auto& py = l.python();
      out += fmt::format("\n    import {} at {}, top-level import {} at {}", py.import_module(), Site(py.import_site()),
                         py.top_module(), Site(py.top_site()));
    }
    out += "\n";
  }
  return out;
}

class DistAarch64 : public ::testing::TestWithParam<Install> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(AARCH64_PYTHON_ROOT "/complete")) << "the dist_aarch64 fixture makes it";
    ASSERT_TRUE(std::filesystem::exists(GetParam().ldscope)) << "the dist_aarch64 fixture installs it";
  }
};

TEST_P(DistAarch64, TracesArm64Python) {
  const auto& in = GetParam();
  const auto dir = testing::ScratchDir("dist_aarch64_" + in.name);
  auto v = RunCmd({QEMU_AARCH64, in.ldscope, "--version"}, kEnv);
  ASSERT_EQ(v.code, 0) << v.err;
  EXPECT_EQ(v.out, "ldscope " LDSCOPE_VERSION "\n");

  const auto trace = dir + "/t.ldscope", report = dir + "/report.txt";
  // run's directory (its socket) in a TMPDIR of its own: qemu-user makes up the start
  // time in its /proc/self/stat, a tick or two off the kernel's, so the owner file of a
  // run under qemu names a process that any other `ldscope run` on this machine, cleaning
  // $TMPDIR of dead runs' directories, takes for gone.
  std::filesystem::create_directories(dir + "/tmp");
  auto env = kEnv;
  env.push_back("TMPDIR=" + dir + "/tmp");
  auto r = RunCmd({QEMU_AARCH64, in.ldscope, "run", "-q", "-o", trace, "--report", report, "--", QEMU_AARCH64,
                   kRoot + "/usr/bin/python3", "-c", "import json, ctypes; print(ctypes.sizeof(ctypes.c_void_p))"},
                  env, {}, 300);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "8\n");
  EXPECT_EQ(r.err, "");

  // The install's own audit library and Python hook, in the arm64 process.
  const auto t = testing::TimelineOf({trace});
  const v1::ProcessTimeline* py = nullptr;
  for (const auto& p : t.processes())
    if (p.has_python()) py = &p;
  ASSERT_NE(py, nullptr);
  EXPECT_EQ(py->env().at("LD_AUDIT"), in.audit);
  EXPECT_EQ(py->env().at("PYTHONPATH").substr(0, py->env().at("PYTHONPATH").find(':')), in.hook);

  // The arm64 ldscope's own `show` ties the load of _ctypes to the import that made it.
  auto show = RunCmd({QEMU_AARCH64, in.ldscope, "show", trace}, kEnv);
  ASSERT_EQ(show.code, 0) << show.err;
  // (show writes the file relative to the working directory where it is under it)
  EXPECT_TRUE(std::regex_search(show.out, std::regex("\n +python import _ctypes at [^ ]*/ctypes/__init__\\.py:8, "
                                                     "during import ctypes at <string>:1\n")))
      << show.out;

  std::string text =
      fmt::format("exe {}\nglibc {}\npython {}\n", py->exe(), py->glibc_version(), py->python().executable());
  text += Loads(*py);
  text += "report:\n" + testing::ReadFile(report);
  testing::ExpectGolden("dist_aarch64_python.txt", testing::ReplaceAll(text, kRoot, "${ARM64_ROOT}"));
}

INSTANTIATE_TEST_SUITE_P(Installs, DistAarch64, ::testing::ValuesIn(Installs()),
                         [](const auto& info) { return info.param.name; });

// The wheel's Python package, imported by the arm64 python3, finds its binary.
TEST(DistAarch64Wheel, PackageFindsItsBinary) {
  auto r = RunCmd({QEMU_AARCH64, kRoot + "/usr/bin/python3", "-c",
                   "import ldscope; print(ldscope.__version__); print(ldscope.binary())"},
                  {"QEMU_LD_PREFIX=" + kRoot, "PYTHONPATH=" + kInstalls + "/wheel"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, LDSCOPE_VERSION "\n" + kInstalls + "/wheel/ldscope/data/bin/ldscope\n");
}

}  // namespace
}  // namespace ldscope
