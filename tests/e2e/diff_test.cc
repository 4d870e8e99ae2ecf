// `ldscope diff` on two traces of the fixture app in which one dependency moved: the
// diff reports exactly that move (and the finding it brings), as a golden file.
#include <gtest/gtest.h>

#include <regex>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

TEST(Diff, ReportsExactlyTheMovedDependency) {
  const auto dir = testing::ScratchDir("diff_moved");
  const std::string fx = FIXTURES;
  const std::vector<std::string> app = {DLPROBE, "open", fx + "/lib/libfix_a.so"};
  auto run = [&](const std::string& out, const std::vector<std::string>& env) {
    std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", out, "--"};
    cmd.insert(cmd.end(), app.begin(), app.end());
    const auto r = RunCmd(cmd, env, {"LD_LIBRARY_PATH"});
    ASSERT_EQ(r.code, 0) << r.err;
  };
  run(dir + "/base.ldscope", {});
  run(dir + "/new.ldscope", {"LD_LIBRARY_PATH=" + fx + "/lib/alt"});
  // The same workload traced twice: no change at all.
  run(dir + "/again.ldscope", {});
  const auto same = RunCmd({LDSCOPE_BIN, "diff", "--fail-on", "changes,new-findings",
                            dir + "/base.ldscope", dir + "/again.ldscope"});
  EXPECT_EQ(same.code, 0) << same.out;
  EXPECT_EQ(same.out, "0 changes, 0 new findings, 0 resolved\n");

  const auto d = RunCmd({LDSCOPE_BIN, "diff", dir + "/base.ldscope", dir + "/new.ldscope"});
  ASSERT_EQ(d.code, 0) << d.err;
  std::string text = testing::ReplaceAll(d.out, fx, "${FIXTURES}");
  text = testing::ReplaceAll(text, DLPROBE, "${DLPROBE}");
  text = std::regex_replace(text, std::regex("pid [0-9]+ -> [0-9]+"), "pid B -> N");
  text = std::regex_replace(text, std::regex("process(:?) [0-9]+"), "process$1 N");
  testing::ExpectGolden("diff_moved.txt", text);
  // CI gate.
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "diff", "--fail-on", "new-findings", dir + "/base.ldscope",
                    dir + "/new.ldscope"}).code, 3);
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "diff", "--fail-on", "new-findings", dir + "/new.ldscope",
                    dir + "/base.ldscope"}).code, 0) << "the reverse direction resolves it";
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "diff", "--fail-on", "bogus", dir + "/base.ldscope",
                    dir + "/new.ldscope"}).code, 2);
  const auto j = RunCmd({LDSCOPE_BIN, "diff", "--format", "json", dir + "/base.ldscope",
                         dir + "/new.ldscope"});
  EXPECT_NE(j.out.find("\"kind\": \"moved\""), std::string::npos) << j.out;
}

}  // namespace
}  // namespace ldscope
