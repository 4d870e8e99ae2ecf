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
  testing::ExpectGolden("imports_cupy_torch.txt", text);
  // A module that does not exist is a usage error, said with Python's own words
  // (tests/adversarial/lifecycle_test.cc has the whole message).
  const auto m = testing::RunCmd({LDSCOPE_BIN, "imports", "--format", "json", "json", "no_such_module_x"}, env);
  EXPECT_EQ(m.code, 2) << m.err;
  EXPECT_EQ(m.out, "");
  EXPECT_NE(m.err.find("ModuleNotFoundError: No module named 'no_such_module_x'"), std::string::npos) << m.err;
  EXPECT_EQ(testing::RunCmd({LDSCOPE_BIN, "imports"}).code, 2);
}

}  // namespace
}  // namespace ldscope
