// `ldscope imports cupy torch` on fixture packages that re-create the cupy/torch
// situation (a fake cupy preloading the old NCCL, a fake torch whose extension-like
// library needs the new one), with the machine's real python3: the matrix and the
// conclusions, whole, against a golden file.
#include <gtest/gtest.h>

#include <regex>

#include "support/test_support.h"

namespace ldscope {
namespace {

TEST(Imports, CupyTorchMatrixAndConclusions) {
  const std::vector<std::string> env = {"PYTHONPATH=" FIXTURES "/site-packages"};
  const auto r = testing::RunCmd({LDSCOPE_BIN, "imports", "cupy", "torch"}, env);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string text = testing::ReplaceAll(r.out, FIXTURES, "${FIXTURES}");
  text = std::regex_replace(text, std::regex("\\+[0-9]+\\.[0-9] ms"), "+T ms");
  const std::string golden = GOLDEN_DIR "/imports_cupy_torch.txt";
  if (getenv("LDSCOPE_UPDATE_GOLDEN") != nullptr) testing::WriteFile(golden, text);
  EXPECT_EQ(text, testing::ReadFile(golden));
  // A module that does not exist: that order fails, with Python's own error.
  const auto m = testing::RunCmd({LDSCOPE_BIN, "imports", "--format", "json", "json", "no_such_module_x"}, env);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("ModuleNotFoundError: No module named 'no_such_module_x'"), std::string::npos) << m.out;
  EXPECT_EQ(testing::RunCmd({LDSCOPE_BIN, "imports"}).code, 2);
}

}  // namespace
}  // namespace ldscope
