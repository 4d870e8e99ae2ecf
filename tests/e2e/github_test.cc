// CI output: with GITHUB_ACTIONS=true (or --github), findings become workflow-command
// annotations and a Markdown table appended to $GITHUB_STEP_SUMMARY.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

TEST(Github, AnnotationsAndStepSummary) {
  const auto dir = testing::ScratchDir("github");
  const std::string summary = dir + "/summary.md";
  testing::WriteFile(summary, "earlier steps wrote this\n");
  // The workspace holds the script: its ctypes line gets the annotation.
  const std::string workspace = std::string(SCENARIOS_DIR).substr(0, std::string(SCENARIOS_DIR).rfind('/'));
  const std::vector<std::string> env = {"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary,
                                        "GITHUB_WORKSPACE=" + workspace};
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", dir + "/t.ldscope", "--",
                         "/usr/bin/python3", SCENARIOS_DIR "/cupy_then_torch.py", FIXTURES},
                        env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("::"), std::string::npos) << "the command's stdout stays its own";
  EXPECT_NE(r.err.find("::error file=scenarios/cupy_then_torch.py,line=7,title=ldscope missing-symbol (pid "),
            std::string::npos)
      << r.err;
  // Each finding once: as its annotation, not also as text; the counts end the log.
  size_t headlines = 0;
  for (size_t at = 0; (at = r.err.find("libtorch_cuda.so failed to load:", at)) != std::string::npos; ++at) ++headlines;
  EXPECT_EQ(headlines, 1u) << r.err;
  EXPECT_NE(r.err.find("\n1 error, 0 warnings, 0 info\n"), std::string::npos) << r.err;
  // The headline, then the evidence and the fixes as the annotation's further lines.
  EXPECT_NE(r.err.find("::libtorch_cuda.so failed to load: ncclCommRegister is not in the "
                       "libnccl.so.2 it was bound to%0Afailed: " FIXTURES
                       "/site-packages/torch/lib/libtorch_cuda.so, loaded by ctypes.CDLL('"),
            std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find("%0Afix: move the statement at " SCENARIOS_DIR "/cupy_then_torch.py:6-10 (holding `ctypes.CDLL('"),
      std::string::npos)
      << r.err;
  // report: annotations on stdout; a clean trace gives a clean summary.
  const auto clean_trace = dir + "/clean.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", clean_trace, "--", "/bin/true"}, {}, {"GITHUB_ACTIONS"}).code, 0);
  const auto rep = RunCmd({LDSCOPE_BIN, "report", "--github", clean_trace},
                          {"GITHUB_STEP_SUMMARY=" + summary}, {"GITHUB_ACTIONS"});
  EXPECT_EQ(rep.code, 0);
  // The whole summary file: what earlier steps wrote, then run's table, then report's
  // clean summary, each appended. Paths may come Markdown-escaped ('_' as '\_').
  std::string s = testing::ReadFile(summary);
  for (const std::string path : {FIXTURES, SCENARIOS_DIR, dir.c_str()}) {
    std::string md;
    for (char c : path) md += (std::string_view("\\`*_[]|~#!(){}").find(c) != std::string_view::npos ? "\\" : "") + std::string(1, c);
    s = testing::ReplaceAll(s, md, path);
  }
  testing::ExpectGolden("github_step_summary.md", s);
  // Without the variable or the flag: no annotations.
  const auto plain = RunCmd({LDSCOPE_BIN, "report", dir + "/t.ldscope"}, {}, {"GITHUB_ACTIONS"});
  EXPECT_EQ(plain.out.find("::error"), std::string::npos);
}

}  // namespace
}  // namespace ldscope
