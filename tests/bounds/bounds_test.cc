// Reading a trace is bounded by its size (docs/ARCHITECTURE.md, "Bounds on reading a
// trace"): on each extreme but legal shape (trace_shapes.h, at the size where an
// unbounded reader needed gigabytes or minutes), every command that reads traces runs
// under a 1 GiB address-space limit and a CPU-time limit and either succeeds or says the
// trace is too large; it never dies of bad_alloc, a signal or the limit, and its peak
// resident memory stays within the documented bound.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "bounds/trace_shapes.h"
#include "support/test_support.h"

namespace ldscope::testing {
namespace {

// The documented bound: 64 bytes of memory per byte of trace, above a base of 256 MiB.
constexpr uint64_t kPerByte = 64, kBase = 256ull << 20;

struct Child {
  int status = 0;
  uint64_t max_rss = 0;  // bytes
  std::string err;
};

// argv under the limits, its output into out_file.
Child RunLimited(const std::vector<std::string>& argv, const std::string& out_file, const std::string& err_file) {
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit as{1ull << 30, 1ull << 30}, cpu{10, 10}, fsize{256ull << 20, 256ull << 20};
    setrlimit(RLIMIT_AS, &as);
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_FSIZE, &fsize);
    const int out = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  Child c;
  rusage ru{};
  wait4(pid, &c.status, 0, &ru);
  c.max_rss = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  c.err = ReadFile(err_file);
  return c;
}

class Bounds : public ::testing::TestWithParam<std::pair<std::string, Shape>> {};

TEST_P(Bounds, EveryReaderWithinTheBound) {
  const auto& [name, shape] = GetParam();
  const std::string dir = ScratchDir("bounds_" + name), trace = dir + "/t.ldscope";
  // The same shape traced on another host: the two make a report over hosts.
  const std::string other = dir + "/other.ldscope";
  ASSERT_TRUE(WriteTrace(trace, shape, FullSize(shape)));
  ASSERT_TRUE(WriteTrace(other, shape, FullSize(shape), "shapes-b"));
  struct stat st {
  }, other_st{};
  ASSERT_EQ(stat(trace.c_str(), &st), 0);
  ASSERT_EQ(stat(other.c_str(), &other_st), 0);
  // The commands that read both traces are held to the bound of both.
  const uint64_t one = static_cast<uint64_t>(st.st_size), both = one + static_cast<uint64_t>(other_st.st_size);
  struct Command {
    std::string what;
    std::vector<std::string> args;
    uint64_t bytes;  // of trace read
  };
  const std::vector<Command> commands = {
      {"show", {"show", trace}, one},
      {"report", {"report", trace}, one},
      {"report json", {"report", "--format", "json", trace}, one},
      {"lock", {"lock", trace, "-o", dir + "/lock"}, one},
      // After lock: the traces against the lock made of them.
      {"check --lock", {"check", "--lock", dir + "/lock", trace}, one},
      {"diff", {"diff", trace, trace}, both},
      {"export", {"export", "--chrome", "-o", dir + "/chrome.json", trace}, one},
      {"report over hosts", {"report", trace, other}, both},
  };
  for (const auto& [cmd_what, cmd, bytes] : commands) {
    const uint64_t bound = kPerByte * bytes + kBase;
    std::vector<std::string> argv = {LDSCOPE_BIN};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    const Child c = RunLimited(argv, dir + "/out", dir + "/err");
    const std::string what = name + ": ldscope " + cmd_what;
    ASSERT_TRUE(WIFEXITED(c.status)) << what << " died of signal " << WTERMSIG(c.status) << "\n" << c.err;
    const int code = WEXITSTATUS(c.status);
    const bool too_large = c.err.find("too large: ") != std::string::npos;
    EXPECT_TRUE(code == 0 || code == 1 || (code == 2 && too_large)) << what << " exited " << code << "\n" << c.err;
    EXPECT_EQ(c.err.find("bad_alloc"), std::string::npos) << what << "\n" << c.err;
    EXPECT_LE(c.max_rss, bound) << what << ": peak RSS " << c.max_rss << " bytes for traces of " << bytes;
  }
}

// Past the size a reader takes (docs/ARCHITECTURE.md: 4 GiB of trace in all), every
// command refuses the traces at once, before reading them: exit 2, "too large: ". The
// files are sparse (a valid trace's bytes, then a hole): they take no disk.
TEST(Bounds, TraceSetsPastTheCapAreRefused) {
  const std::string dir = ScratchDir("bounds_cap"), big = dir + "/big.ldscope", half_a = dir + "/half_a.ldscope",
                    half_b = dir + "/half_b.ldscope", small = dir + "/small.ldscope",
                    small_b = dir + "/small_b.ldscope", lock = dir + "/lock";
  ASSERT_TRUE(WriteTrace(small, Shape::kForks, {1, 1}));
  ASSERT_TRUE(WriteTrace(small_b, Shape::kForks, {1, 1}, "shapes-b"));
  constexpr uint64_t kCap = 4ull << 30;
  for (const auto& [path, from, size] : {std::tuple{big, small, kCap + 1}, std::tuple{half_a, small, kCap / 2 + 1},
                                         std::tuple{half_b, small_b, kCap / 2 + 1}}) {
    const std::string head = ReadFile(from);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    close(fd);
  }
  // A lock to check against, made of a small trace.
  ASSERT_EQ(RunLimited({LDSCOPE_BIN, "lock", small, "-o", lock}, dir + "/out", dir + "/err").status, 0);
  const std::vector<std::vector<std::string>> commands = {
      {"show", big},
      {"show", "--format", "json", big},
      {"report", big},
      {"report", small, big},
      {"report", half_a, half_b},  // two hosts' traces, too large together
      {"lock", big, "-o", dir + "/lock2"},
      {"check", "--lock", lock, big},
      {"diff", small, big},
      {"diff", half_a, half_b},  // the two sides together
      {"export", "--chrome", "-o", dir + "/chrome.json", big},
  };
  for (const auto& cmd : commands) {
    std::vector<std::string> argv = {LDSCOPE_BIN};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    const Child c = RunLimited(argv, dir + "/out", dir + "/err");
    std::string what = "ldscope";
    for (const auto& a : cmd) what += " " + a;
    ASSERT_TRUE(WIFEXITED(c.status)) << what << " died of signal " << WTERMSIG(c.status) << "\n" << c.err;
    EXPECT_EQ(WEXITSTATUS(c.status), 2) << what << "\n" << c.err;
    EXPECT_NE(c.err.find("too large: "), std::string::npos) << what << "\n" << c.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bounds, ::testing::ValuesIn(Shapes()),
                         [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace ldscope::testing
