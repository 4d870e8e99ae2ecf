// `ldscope imports cupy torch` on fixture packages that re-create the cupy/torch
// situation (a fake cupy preloading the old NCCL, a fake torch whose extension-like
// library needs the new one), with the machine's real python3: the matrix and the
// conclusions, whole, against a golden file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <regex>

#include "support/test_support.h"

namespace ldscope {
namespace {

TEST(Imports, CupyTorchMatrixAndConclusions) {
  const std::vector<std::string> env = {"PYTHONPATH=" FIXTURES "/site-packages"};
  const auto r = testing::RunCmd({LDSCOPE_BIN, "imports", "--python", "/usr/bin/python3", "cupy", "torch"}, env);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string text = testing::ReplaceAll(r.out, FIXTURES, "${FIXTURES}");
  text = std::regex_replace(text, std::regex("\\+[0-9]+\\.[0-9] ms"), "+T ms");
  testing::ExpectGolden("imports_cupy_torch.txt", text);
  // A module that does not exist is a usage error, said with Python's own words
  // (tests/adversarial/lifecycle_test.cc has the whole message).
  const auto m = testing::RunCmd(
      {LDSCOPE_BIN, "imports", "--python", "/usr/bin/python3", "--format", "json", "json", "no_such_module_x"}, env);
  EXPECT_EQ(m.code, 2) << m.err;
  EXPECT_EQ(m.out, "");
  EXPECT_NE(m.err.find("ModuleNotFoundError: No module named 'no_such_module_x'"), std::string::npos) << m.err;
  EXPECT_EQ(testing::RunCmd({LDSCOPE_BIN, "imports"}).code, 2);
  EXPECT_EQ(testing::RunCmd({LDSCOPE_BIN, "imports", "-j", "0", "json"}).code, 2);
}

// --fail-on as run has it: the failing order matches "error", the second order's
// duplicate matches its kind; a kind no order has leaves the status 0. The orders run
// four at a time print the same matrix as one at a time.
TEST(Imports, FailOnAndJobs) {
  const std::vector<std::string> env = {"PYTHONPATH=" FIXTURES "/site-packages"};
  const auto plain =
      testing::RunCmd({LDSCOPE_BIN, "imports", "--python", "/usr/bin/python3", "-j", "1", "cupy", "torch"}, env);
  ASSERT_EQ(plain.code, 0) << plain.err;
  for (const auto& [word, code] : std::vector<std::pair<std::string, int>>{
           {"error", 3}, {"duplicate-library", 3}, {"missing-symbol", 3}, {"cuda-driver", 0}}) {
    const auto r = testing::RunCmd(
        {LDSCOPE_BIN, "imports", "--python", "/usr/bin/python3", "--fail-on", word, "cupy", "torch"}, env);
    EXPECT_EQ(r.code, code) << word << ": " << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find("\n\n")), plain.out.substr(0, plain.out.find("\n\n"))) << word;
  }
  const auto four = testing::RunCmd(
      {LDSCOPE_BIN, "imports", "--python", "/usr/bin/python3", "-j", "4", "cupy", "torch", "json"}, env);
  const auto one = testing::RunCmd(
      {LDSCOPE_BIN, "imports", "--python", "/usr/bin/python3", "-j", "1", "cupy", "torch", "json"}, env);
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(four.code, 0) << four.err;
  const auto untimed = [](const std::string& s) { return std::regex_replace(s, std::regex("\\+[0-9.]+ ms"), "+T ms"); };
  EXPECT_EQ(untimed(four.out), untimed(one.out));
  EXPECT_EQ(four.err, "");  // not a terminal: no progress line
  // On a terminal: the orders run so far (the first and the last count always shown),
  // erased before the matrix.
  const std::vector<std::string> on_tty = {"/bin/sh", "-c", "exec script -qec \"$0\" /dev/null </dev/null",
                                           "'" LDSCOPE_BIN "' imports --python /usr/bin/python3 -j 1 cupy torch json"};
  const auto tty = testing::RunCmd(on_tty, {"TERM=xterm", "SHELL=/bin/sh", env[0]});
  ASSERT_EQ(tty.code, 0) << tty.out << tty.err;
  const std::string first = "\rimports: 1 of 6 orders run", last = first.substr(0, 10) + "6" + first.substr(11) + "\r" +
                                                                   std::string(first.size() - 1, ' ') + "\r";
  EXPECT_EQ(tty.out.find(first), 0u) << tty.out;
  const size_t end = tty.out.find(last);
  ASSERT_NE(end, std::string::npos) << tty.out;
  EXPECT_EQ(untimed(testing::ReplaceAll(tty.out.substr(end + last.size()), "\r\n", "\n")), untimed(one.out));
}

// Without --python, the python3 first on PATH runs the orders (a venv's, a pyenv
// shim), as every Python tool does; the report names it.
TEST(Imports, PythonFromPath) {
  const std::string dir = testing::ScratchDir("imports_path");
  const std::string bin = dir + "/bin";
  ASSERT_EQ(system(("mkdir -p " + bin + " && ln -sf /usr/bin/python3 " + bin + "/python3").c_str()), 0);
  const auto r =
      testing::RunCmd({LDSCOPE_BIN, "imports", "--format", "json", "json"}, {"PATH=" + bin + ":/usr/bin:/bin"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"python\": \"" + bin + "/python3\""), std::string::npos) << r.out;
  const auto none = testing::RunCmd({LDSCOPE_BIN, "imports", "json"}, {"PATH=" + dir + "/empty"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("the interpreter python3 is not on PATH"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace ldscope
