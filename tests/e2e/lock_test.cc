// `ldscope lock`, `ldscope check --lock` and `ldscope run --lock` on real programs under
// the real audit library: the dlprobe driver loading fixture libraries (libfix_a.so and
// its RUNPATH dependency libfix_b.so, a wheel's libnccl.so.2 found via LD_LIBRARY_PATH),
// then the same workload with libraries swapped (another libfix_b.so, an older NCCL in
// a directory whose name holds a quote and a non-UTF-8 byte). Goldens for the lock and
// for a failing check's differences.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "analysis/lock.h"
#include "store/lock_file.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

struct Workload {
  std::string dir;  // scratch
  std::string fx = FIXTURES;
  std::string old_nccl;  // a directory with an older libnccl.so.2 (a link to it)
  std::vector<std::string> app;
  std::vector<std::string> base_env, swapped_env;
};

Workload Make(const std::string& name) {
  Workload w;
  w.dir = testing::ScratchDir(name);
  w.old_nccl = w.dir + "/o'ld\xff";
  EXPECT_EQ(mkdir(w.old_nccl.c_str(), 0755), 0);
  EXPECT_EQ(symlink((w.fx + "/system/lib/libnccl.so.2.16.2").c_str(),
                    (w.old_nccl + "/libnccl.so.2").c_str()), 0);
  w.app = {DLPROBE, "open", w.fx + "/lib/libfix_a.so", "open", "libnccl.so.2"};
  w.base_env = {"LD_LIBRARY_PATH=" + w.fx + "/site-packages/nvidia/nccl/lib"};
  w.swapped_env = {"LD_LIBRARY_PATH=" + w.fx + "/lib/alt:" + w.old_nccl};
  return w;
}

testing::Proc Trace(const Workload& w, const std::string& out, const std::vector<std::string>& env,
                    std::vector<std::string> extra = {}, std::vector<std::string> ldscope_args = {}) {
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", out};
  cmd.insert(cmd.end(), ldscope_args.begin(), ldscope_args.end());
  cmd.push_back("--");
  cmd.insert(cmd.end(), w.app.begin(), w.app.end());
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  return RunCmd(cmd, env, {"LD_LIBRARY_PATH", "LD_PRELOAD", "CONDA_PREFIX", "VIRTUAL_ENV"});
}

std::string Normalise(const Workload& w, std::string text) {
  text = testing::ReplaceAll(text, w.fx, "${FIXTURES}");
  text = testing::ReplaceAll(text, w.dir, "${SCRATCH}");
  text = testing::ReplaceAll(text, DLPROBE, "${DLPROBE}");
  // Build-ids depend on the build directory (debug info); the lock's own test below
  // checks that they are there.
  return std::regex_replace(text, std::regex("[0-9a-f]{16,}"), "${BUILD_ID}");
}

// The lock without the system libraries dlprobe links (which differ between
// distributions), except the C library, whose version is this machine's.
std::string NormaliseLock(const Workload& w, const std::string& lock) {
  std::string out;
  size_t pos = 0;
  while (pos < lock.size()) {
    const size_t end = lock.find('\n', pos);
    std::string line = lock.substr(pos, end - pos);
    pos = end == std::string::npos ? lock.size() : end + 1;
    if (line.find("root = 'system'") != std::string::npos) {
      if (line.rfind("'libc.so.6' = ", 0) != 0) continue;
      line = std::regex_replace(line, std::regex("version = '[^']*'"), "version = '${GLIBC}'");
    }
    out += line + "\n";
  }
  return Normalise(w, out);
}


size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Lock, StableGoldenAndChecked) {
  const Workload w = Make("lock_golden");
  for (const char* t : {"/base.ldscope", "/again.ldscope"}) {
    const auto r = Trace(w, w.dir + t, w.base_env);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const auto s = Trace(w, w.dir + "/swapped.ldscope", w.swapped_env, {"open", w.fx + "/lib/libfix_libc.so"});
  ASSERT_EQ(s.code, 0) << s.err;

  const auto l1 = RunCmd({LDSCOPE_BIN, "lock", "-o", w.dir + "/ldscope.lock", w.dir + "/base.ldscope"});
  ASSERT_EQ(l1.code, 0) << l1.err;
  EXPECT_EQ(l1.out + l1.err, "");
  const std::string lock = testing::ReadFile(w.dir + "/ldscope.lock");
  // The same workload traced again: byte for byte the same lock.
  const auto l2 = RunCmd({LDSCOPE_BIN, "lock", w.dir + "/again.ldscope"});
  ASSERT_EQ(l2.code, 0) << l2.err;
  EXPECT_EQ(l2.out, lock);
  testing::ExpectGolden("lock_fixtures.lock", NormaliseLock(w, lock));
  // Real build-ids, read from the objects (40 hex digits with GNU ld's default).
  EXPECT_TRUE(std::regex_search(lock, std::regex("'libfix_b.so' = \\{ .* build-id = '[0-9a-f]{16,}' \\}")))
      << lock;
  // TOML that Python's tomllib reads, names escaped as in the rest of ldscope's output.
  const auto toml = RunCmd({"/usr/bin/python3", "-c",
                            "import sys, tomllib\n"
                            "d = tomllib.load(open(sys.argv[1], 'rb'))\n"
                            "assert d['format'] == 1, d\n"
                            "[(p, libs)] = d['program'].items()\n"
                            "print(libs['libnccl.so.2']['root'], libs['libnccl.so.2']['file'])\n",
                            w.dir + "/ldscope.lock"});
  if (toml.err.find("No module named 'tomllib'") == std::string::npos) {
    EXPECT_EQ(toml.code, 0) << toml.err;
    EXPECT_EQ(toml.out, "site-packages nvidia/nccl/lib/libnccl.so.2\n");
  }

  // Checked against a trace of the same workload: nothing to say.
  const auto same = RunCmd({LDSCOPE_BIN, "check", "--lock", w.dir + "/ldscope.lock", w.dir + "/again.ldscope"});
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_EQ(same.out + same.err, "");

  // Swapped libraries: every difference, status 3.
  const auto bad = RunCmd({LDSCOPE_BIN, "check", "--lock", w.dir + "/ldscope.lock", w.dir + "/swapped.ldscope"});
  EXPECT_EQ(bad.code, 3) << bad.err;
  EXPECT_EQ(bad.err, "");
  testing::ExpectGolden("lock_check_swapped.txt", Normalise(w, bad.out));
  EXPECT_NE(bad.out.find("/o'ld\\xff/libnccl.so.2"), std::string::npos)
      << "the odd name is escaped as ldscope escapes names: " << bad.out;

  // Across machines: build-ids not compared, the rest still is.
  const auto nobid = RunCmd({LDSCOPE_BIN, "check", "--ignore-build-id", "--lock", w.dir + "/ldscope.lock",
                             w.dir + "/swapped.ldscope"});
  EXPECT_EQ(nobid.code, 3);
  EXPECT_EQ(nobid.out.find("build-id:"), std::string::npos) << nobid.out;
  EXPECT_NE(nobid.out.find("~ libnccl.so.2 version: NCCL 2.20.5+cuda12.4 -> NCCL 2.16.2+cuda11.8"),
            std::string::npos) << nobid.out;

  // The other way round: what the lock has and the trace does not.
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "lock", "-o", w.dir + "/swapped.lock", w.dir + "/swapped.ldscope"}).code, 0);
  EXPECT_NE(testing::ReadFile(w.dir + "/swapped.lock").find("file = '" + w.dir + "/o\\x27ld\\xff/libnccl.so.2'"),
            std::string::npos) << "in the lock file, the quote as \\x27";
  const auto back = RunCmd({LDSCOPE_BIN, "check", "--lock", w.dir + "/swapped.lock", w.dir + "/base.ldscope"});
  EXPECT_EQ(back.code, 3);
  EXPECT_NE(back.out.find("  - libfix_libc.so: " + w.fx + "/lib/libfix_libc.so (version unknown, build-id "),
            std::string::npos) << back.out;

  // In GitHub Actions: an ::error annotation per difference, after the text.
  const auto gha = RunCmd({LDSCOPE_BIN, "check", "--lock", w.dir + "/ldscope.lock", w.dir + "/swapped.ldscope"},
                          {"GITHUB_ACTIONS=true"});
  EXPECT_EQ(gha.code, 3);
  const size_t differences = Count(bad.out, "\n  ");
  EXPECT_GT(differences, 0u);
  EXPECT_EQ(Count(gha.out, "\n::error title=ldscope lock "), differences) << gha.out;
  EXPECT_NE(gha.out.find("::error title=ldscope lock " + w.dir + "/ldscope.lock (" DLPROBE
                         ")::~ libnccl.so.2 version: NCCL 2.20.5+cuda12.4 -> NCCL 2.16.2+cuda11.8\n"),
            std::string::npos) << gha.out;
  const auto flag = RunCmd({LDSCOPE_BIN, "check", "--github", "--lock", w.dir + "/ldscope.lock",
                            w.dir + "/swapped.ldscope"}, {"GITHUB_STEP_SUMMARY=" + w.dir + "/summary.md"});
  EXPECT_EQ(flag.out, gha.out);
  const std::string summary = testing::ReadFile(w.dir + "/summary.md");
  EXPECT_NE(summary.find("| program | difference |"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\\~ libnccl.so.2 version: NCCL 2.20.5+cuda12.4 -&gt; NCCL 2.16.2+cuda11.8"),
            std::string::npos) << summary;
}

TEST(Lock, RunChecksAfterTheCommand) {
  const Workload w = Make("lock_run");
  ASSERT_EQ(Trace(w, w.dir + "/base.ldscope", w.base_env).code, 0);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "lock", "-o", w.dir + "/ldscope.lock", w.dir + "/base.ldscope"}).code, 0);
  const std::vector<std::string> lock = {"--lock", w.dir + "/ldscope.lock"};

  const auto ok = Trace(w, w.dir + "/ok.ldscope", w.base_env, {}, lock);
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
  const auto bad = Trace(w, w.dir + "/bad.ldscope", w.swapped_env, {}, lock);
  EXPECT_EQ(bad.code, 3) << bad.err;
  EXPECT_NE(bad.err.find("~ libnccl.so.2 version: NCCL 2.20.5+cuda12.4 -> NCCL 2.16.2+cuda11.8"),
            std::string::npos) << bad.err;
  EXPECT_EQ(bad.out.find("version:"), std::string::npos) << "the command's stdout stays its own";
  // The trace run wrote is the one check reads the same way.
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "check", "--lock", w.dir + "/ldscope.lock", w.dir + "/bad.ldscope"}).code, 3);
  // Annotations on stderr in GitHub Actions.
  std::vector<std::string> env = w.swapped_env;
  env.push_back("GITHUB_ACTIONS=true");
  const auto gha = Trace(w, w.dir + "/gha.ldscope", env, {}, lock);
  EXPECT_EQ(gha.code, 3);
  EXPECT_NE(gha.err.find("::error title=ldscope lock "), std::string::npos) << gha.err;
  // The status: the command's own when the trace matches; a mismatch ranks as --fail-on
  // does, over the command's status.
  EXPECT_EQ(Trace(w, w.dir + "/exit.ldscope", w.base_env, {"exit", "5"}, lock).code, 5);
  EXPECT_EQ(Trace(w, w.dir + "/exit2.ldscope", w.swapped_env, {"exit", "5"}, lock).code, 3);
  // --ignore-build-id on run too.
  const auto nobid = Trace(w, w.dir + "/nobid.ldscope", w.swapped_env, {}, {"--lock", w.dir + "/ldscope.lock",
                                                                           "--ignore-build-id"});
  EXPECT_EQ(nobid.code, 3);
  EXPECT_EQ(nobid.err.find("build-id:"), std::string::npos) << nobid.err;
}

TEST(Lock, BadLockFiles) {
  const Workload w = Make("lock_bad");
  ASSERT_EQ(Trace(w, w.dir + "/base.ldscope", w.base_env).code, 0);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "lock", "-o", w.dir + "/good.lock", w.dir + "/base.ldscope"}).code, 0);
  const std::string good = testing::ReadFile(w.dir + "/good.lock");
  auto check = [&](const std::string& lock) {
    return RunCmd({LDSCOPE_BIN, "check", "--lock", lock, w.dir + "/base.ldscope"});
  };
  const auto missing = check(w.dir + "/none.lock");
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.err, "ldscope: cannot read the lock file " + w.dir + "/none.lock: No such file or directory\n");
  EXPECT_EQ(check(w.dir).code, 2) << "a directory";

  // A library line cut short: the line number of the lock file.
  const size_t at = good.find("'libfix_b.so' = ");
  ASSERT_NE(at, std::string::npos);
  const size_t line = static_cast<size_t>(std::count(good.begin(), good.begin() + static_cast<long>(at), '\n')) + 1;
  testing::WriteFile(w.dir + "/cut.lock", good.substr(0, good.find(", version", at)) + "\n");
  const auto cut = check(w.dir + "/cut.lock");
  EXPECT_EQ(cut.code, 2);
  const size_t column = good.find(", version", at) - at + 1;  // the line's end
  EXPECT_EQ(cut.err, "ldscope: " + w.dir + "/cut.lock:" + std::to_string(line) + ":" + std::to_string(column) +
                         ": Error while parsing inline table: expected key or closing '}', saw '\\n'\n");
  EXPECT_EQ(cut.out, "");

  testing::WriteFile(w.dir + "/format.lock", "# a later ldscope's\nformat = 2\n");
  const auto format = check(w.dir + "/format.lock");
  EXPECT_EQ(format.code, 2);
  EXPECT_EQ(format.err, "ldscope: " + w.dir + "/format.lock:2: unsupported lock format 2 (this ldscope reads format 1)\n");

  testing::WriteFile(w.dir + "/root.lock", "format = 1\n[program.'/x']\n'liba.so' = { root = 'home', "
                                           "file = 'a', version = 'unknown', build-id = 'unknown' }\n");
  const auto root = check(w.dir + "/root.lock");
  EXPECT_EQ(root.code, 2);
  EXPECT_NE(root.err.find("root.lock:3: unknown root 'home'"), std::string::npos) << root.err;

  testing::WriteFile(w.dir + "/twice.lock", good + "\n" + good.substr(good.find("[program.")));
  const auto twice = check(w.dir + "/twice.lock");
  EXPECT_EQ(twice.code, 2);
  const size_t second = static_cast<size_t>(std::count(good.begin(), good.end(), '\n')) + 2;
  EXPECT_NE(twice.err.find("twice.lock:" + std::to_string(second) +
                           ":1: Error while parsing table header: cannot "
                           "redefine existing table"),
            std::string::npos)
      << twice.err;

  testing::WriteFile(w.dir + "/empty.lock", "");
  EXPECT_EQ(check(w.dir + "/empty.lock").code, 2);

  // run reads the lock before anything runs.
  const auto run = Trace(w, w.dir + "/never.ldscope", w.base_env, {"mark", w.dir + "/ran"},
                         {"--lock", w.dir + "/cut.lock"});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("cut.lock:" + std::to_string(line) + ":"), std::string::npos) << run.err;
  EXPECT_NE(access((w.dir + "/ran").c_str(), F_OK), 0) << "the command ran";
  EXPECT_NE(access((w.dir + "/never.ldscope").c_str(), F_OK), 0);

  // A damaged trace: status 1 when what precedes the damage matches.
  const std::string trace = testing::ReadFile(w.dir + "/base.ldscope");
  testing::WriteFile(w.dir + "/damaged.ldscope", trace + std::string("\x05\x01", 2));
  const auto damaged = check(w.dir + "/good.lock");
  EXPECT_EQ(damaged.code, 0);
  const auto d = RunCmd({LDSCOPE_BIN, "check", "--lock", w.dir + "/good.lock", w.dir + "/damaged.ldscope"});
  EXPECT_EQ(d.code, 1) << d.out << d.err;
}

// A lock is TOML: one edited by hand with "…" strings, comments and other spacing is
// the same lock, and `check` passes with it.
TEST(Lock, HandEditedTomlIsTheSameLock) {
  const Workload w = Make("lock_hand");
  ASSERT_EQ(Trace(w, w.dir + "/base.ldscope", w.base_env).code, 0);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "lock", "-o", w.dir + "/good.lock", w.dir + "/base.ldscope"}).code, 0);
  const std::string good = testing::ReadFile(w.dir + "/good.lock");
  // Every '…' as "…" (a backslash doubled, \x27 as '), a comment after each table
  // and library, other spacing.
  std::string hand = "# edited by hand\n";
  size_t pos = 0;
  while (pos < good.size()) {
    const size_t end = good.find('\n', pos);
    std::string line = good.substr(pos, end - pos);
    pos = end == std::string::npos ? good.size() : end + 1;
    if (line.rfind("format", 0) == 0) {
      hand += "format=1   # the layout\n";
      continue;
    }
    std::string out;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] != '\'') {
        out += line[i];
        continue;
      }
      const size_t close = line.find('\'', i + 1);
      const std::string value = testing::ReplaceAll(line.substr(i + 1, close - i - 1), "\\x27", "'");
      out += "\"" + testing::ReplaceAll(value, "\\", "\\\\") + "\"";
      i = close;
    }
    if (!out.empty() && out[0] != '#') out += "  # a note";
    hand += out + "\n";
  }
  ASSERT_NE(hand.find("[program.\"" + std::string(DLPROBE) + "\"]  # a note\n"), std::string::npos) << hand;
  ASSERT_NE(hand.find("\"libfix_b.so\" = { root = \""), std::string::npos) << hand;
  testing::WriteFile(w.dir + "/hand.lock", hand);
  const auto check = RunCmd({LDSCOPE_BIN, "check", "--lock", w.dir + "/hand.lock", w.dir + "/base.ldscope"});
  EXPECT_EQ(check.code, 0) << check.err;
  EXPECT_EQ(check.out + check.err, "");
  const Result<v1::Lock> a = store::ParseLock(good, "good.lock"), b = store::ParseLock(hand, "hand.lock");
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ(a->DebugString(), b->DebugString());

  // A quote and a byte that is not UTF-8 (escaped text's \xff) in a "…" string.
  const Result<v1::Lock> basic = store::ParseLock(
      "format = 1\n[program.\"system:python3\"]\n\"libq'x.so.1\" = [{ root = \"/\", file = \"/o'ld\\\\xff/libq'x.so\", "
      "version = \"1.2\", build-id = \"abcd\" }]\n",
      "basic.lock");
  const Result<v1::Lock> literal = store::ParseLock(
      "format = 1\n[program.'system:python3']\n'libq\\x27x.so.1' = { root = '/', file = "
      "'/o\\x27ld\\xff/libq\\x27x.so', "
      "version = '1.2', build-id = 'abcd' }\n",
      "literal.lock");
  ASSERT_TRUE(basic.ok()) << basic.error();
  ASSERT_TRUE(literal.ok()) << literal.error();
  EXPECT_EQ(basic->DebugString(), literal->DebugString());
  EXPECT_EQ(literal->programs(0).libraries(0).copies(0).file(), "/o'ld\\xff/libq'x.so");

  // A backslash that starts no escape (the TOML "a\\'b" is a\'b) is an escaped
  // backslash: the lock written of it reads back the same.
  const Result<v1::Lock> lone = store::ParseLock(
      "format = 1\n[program.\"a\\\\'b\"]\n'l' = { root = '/', file = '/f', version = '1', build-id = 'b' }\n",
      "lone.lock");
  ASSERT_TRUE(lone.ok()) << lone.error();
  EXPECT_EQ(lone->programs(0).key(), "a\\\\'b");
  const Result<v1::Lock> again = store::ParseLock(store::FormatLock(*lone), "again.lock");
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->DebugString(), lone->DebugString());
}

// A lock file is untrusted input: whatever it holds, an error naming the line (and,
// for text that is not TOML, the column), never a crash.
TEST(Lock, MalformedTomlErrors) {
  const std::string lib = "[program.'/x']\n'liba.so' = ";
  const std::string kTable = "{ root = '…', file = '…', version = '…', build-id = '…' }";
  const std::string table = "{ root = 'system', file = 'a', version = 'unknown', build-id = 'unknown' }\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "t.lock:1: empty: no `format = 1` (is this an ldscope lock file?)"},
      {"# only a comment\n\n", "t.lock:1: empty: no `format = 1` (is this an ldscope lock file?)"},
      {lib + table, "t.lock:1: no `format = 1` (is this an ldscope lock file?)"},
      {"format = '1'\n", "t.lock:1: the format is a string, not a number"},
      {"\nformat = 2\n", "t.lock:2: unsupported lock format 2 (this ldscope reads format 1)"},
      {"format = 1\nformat = 1\n",
       "t.lock:2:10: Error while parsing key-value pair: cannot redefine existing integer (each key and table once)"},
      {"format = 1\nextra = true\n", "t.lock:2: unknown key 'extra' (format, program)"},
      {"format = 1\nprogram = 3\n", "t.lock:2: expected [program.'EXECUTABLE'] tables"},
      {"format = 1\n[program]\nx = 1\n", "t.lock:3: program 'x' is an integer, not a [program.'EXECUTABLE'] table"},
      {"format = 1\n[[program.'/x']]\n", "t.lock:2: program '/x' is an array, not a [program.'EXECUTABLE'] table"},
      {"format = 1\n" + lib + "'unterminated\n",
       "t.lock:3:26: Error while parsing literal string: control characters other than TAB (U+0009) are explicitly "
       "prohibited"},
      {"format = 1\n" + lib + "{ root = 'system', file = 'a', version = 'unknown' }\n",
       "t.lock:3: each library needs root, file, version and build-id"},
      {"format = 1\n" + lib + "{ root = 'system', file = 'a', version = 1, build-id = 'x' }\n",
       "t.lock:3: version is an integer, not a string"},
      {"format = 1\n" + lib + "{ root = 'home', file = 'a', version = 'unknown', build-id = 'x' }\n",
       "t.lock:3: unknown root 'home' (system, site-packages, conda, venv, cuda, /)"},
      {"format = 1\n" + lib + "{ root = 'system', file = '', version = 'unknown', build-id = 'x' }\n",
       "t.lock:3: file is empty (write 'unknown' for what was not read)"},
      {"format = 1\n" + lib + "{ root = 'system', file = 'a', version = 'unknown', build-id = 'x', os = 'y' }\n",
       "t.lock:3: unknown key 'os' (root, file, version, build-id)"},
      {"format = 1\n" + lib + "{ root = 'system', file = \"a\\u0001\", version = 'unknown', build-id = 'x' }\n",
       "t.lock:3: a control character in a string"},
      {"format = 1\n" + lib + "[]\n", "t.lock:3: library 'liba.so' has no copies"},
      {"format = 1\n" + lib + "[1]\n", "t.lock:3: expected " + kTable + ", not an integer"},
      {"format = 1\n" + lib + "'x'\n", "t.lock:3: expected " + kTable + ", not a string"},
      {"format = 1\n" + lib + table + "\"liba.so\" = " + table,
       "t.lock:4:13: Error while parsing key-value pair: cannot redefine existing table (each key and table once)"},
      {"format = 1\n" + lib + table + "'lib\\x27a.so' = " + table + "\"lib'a.so\" = " + table,
       "t.lock:5: library 'lib'a.so' given twice in program '/x'"},
      {"format = 1\n[program.'']\n", "t.lock:2: the program's name is empty"},
      {"format = 1\n[program.'/x']\n'' = " + table, "t.lock:3: the library's name is empty"},
      {"format = 1\n" + lib + "{ root = 'system', file = '\xff', version = 'unknown', build-id = 'x' }\n",
       "t.lock:3:39: Encountered invalid utf-8 sequence"},
      {"format = 1\nx = " + std::string(100000, '[') + "\n",
       "t.lock:2:261: Error while parsing value: exceeded maximum nested value depth of 256 (TOML_MAX_NESTED_VALUES)"},
      {"format = 1\nx = " + std::string(100000, '{') + "\n",
       "t.lock:2:6: Error while parsing inline table: expected key or closing '}', saw '{'"},
      {std::string("\xef\xbb\xbf") + "format = 1\n" + lib + table, ""},
  };
  for (const auto& [text, want] : cases) {
    const Result<v1::Lock> lock = store::ParseLock(text, "t.lock");
    EXPECT_EQ(lock.error(), want) << text.substr(0, 200);
  }
  // The largest lock read, of what makes the most TOML values per byte, within 1 GiB
  // of address space; one byte more is refused before it is parsed.
  const std::string dir = testing::ScratchDir("lock_malformed");
  const std::string head = "format = 1\n[program.'/x']\n'l' = [", tail = "1]\n";
  std::string big = head;
  while (big.size() + 2 + tail.size() <= (16u << 20)) big += "1,";
  big += tail;
  big.resize(16u << 20, '\n');
  testing::WriteFile(dir + "/big.lock", big);
#ifdef __SANITIZE_ADDRESS__
  // ASan reserves terabytes of address space for its shadow: no address-space limit holds
  // an instrumented ldscope (the plain build checks the bound).
  const std::string limit = "";
#else
  const std::string limit = "ulimit -v 1048576; ";
#endif
  const auto limited =
      RunCmd({"/bin/sh", "-c", limit + "exec \"$0\" check --lock \"$1\" /nonexistent", LDSCOPE_BIN, dir + "/big.lock"});
  EXPECT_EQ(limited.code, 2);
  EXPECT_EQ(limited.err, "ldscope: " + dir + "/big.lock:3: expected " + kTable + ", not an integer\n");
  testing::WriteFile(dir + "/bigger.lock", big + "\n");
  const auto bigger = RunCmd({LDSCOPE_BIN, "check", "--lock", dir + "/bigger.lock", "/nonexistent"});
  EXPECT_EQ(bigger.code, 2);
  EXPECT_EQ(bigger.err, "ldscope: cannot read the lock file " + dir + "/bigger.lock: larger than 16 MiB\n");

  // The same through the command.
  testing::WriteFile(dir + "/bad.lock",
                     "format = 1\n" + lib + "{ root = 'system', file = 'a', version = 1, build-id = 'x' }\n");
  const auto check = RunCmd({LDSCOPE_BIN, "check", "--lock", dir + "/bad.lock", "/nonexistent.ldscope"});
  EXPECT_EQ(check.code, 2);
  EXPECT_EQ(check.out, "");
  EXPECT_EQ(check.err, "ldscope: " + dir + "/bad.lock:3: version is an integer, not a string\n");
}

// A library found in a glibc-hwcaps subdirectory is locked as the file it specialises,
// with that file's build-id: the lock is the one a CPU without the subdirectory's level
// (here: the same machine with the subdirectory gone) writes.
TEST(Lock, HwcapsSubdirectoryIsTheFileItSpecialises) {
  const Workload w = Make("lock_hwcaps");
  const std::string dir = w.dir + "/h";
  std::filesystem::create_directories(dir + "/glibc-hwcaps/x86-64-v2");
  std::filesystem::copy_file(w.fx + "/lib/libfix_b.so", dir + "/libfix_b.so");
  std::filesystem::copy_file(w.fx + "/lib/alt/libfix_b.so", dir + "/glibc-hwcaps/x86-64-v2/libfix_b.so");
  auto lock = [&](const std::string& name) {
    const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", w.dir + "/" + name, "--",
                           DLPROBE, "open", "libfix_b.so"},
                          {"LD_LIBRARY_PATH=" + dir}, {"LD_PRELOAD"});
    EXPECT_EQ(r.code, 0) << r.err;
    return RunCmd({LDSCOPE_BIN, "lock", w.dir + "/" + name}).out;
  };
  const std::string specialised = lock("v2.ldscope");
  const auto shown = RunCmd({LDSCOPE_BIN, "show", w.dir + "/v2.ldscope"});
  const bool used = shown.out.find("glibc-hwcaps/x86-64-v2/libfix_b.so") != std::string::npos;
  std::filesystem::remove_all(dir + "/glibc-hwcaps");
  const std::string plain = lock("plain.ldscope");
  EXPECT_NE(plain.find("'libfix_b.so' = { root = '/', file = '" + dir + "/libfix_b.so', "), std::string::npos)
      << plain;
  EXPECT_EQ(specialised, plain);
  if (!used) GTEST_SKIP() << "this CPU or glibc did not load the x86-64-v2 copy: " << shown.out;
}

// The parts that do not need a run: roots, hwcaps subdirectories, merging, the file
// format's round trip.
TEST(Lock, RootsAndFormat) {
  const std::map<std::string, std::string> env = {{"CONDA_PREFIX", "/opt/conda/envs/t/"},
                                                  {"VIRTUAL_ENV", "/home/u/proj/.venv"}};
  auto root = [&](const std::string& p) {
    const auto f = analysis::RootOf(p, env);
    return store::Rooted(f.root(), f.file());
  };
  EXPECT_EQ(root("/home/u/proj/.venv/lib/python3.11/site-packages/torch/lib/libtorch.so"),
            "site-packages:torch/lib/libtorch.so");
  EXPECT_EQ(root("/usr/lib/python3/dist-packages/numpy/core/_m.so"), "site-packages:numpy/core/_m.so");
  EXPECT_EQ(root("/opt/conda/envs/t/lib/libstdc++.so.6"), "conda:lib/libstdc++.so.6");
  EXPECT_EQ(root("/home/u/proj/.venv/bin/python3"), "venv:bin/python3");
  EXPECT_EQ(root("/usr/local/cuda-12.4/lib64/libcudart.so.12"), "cuda:lib64/libcudart.so.12");
  EXPECT_EQ(root("/opt/nv/12.3/targets/x86_64-linux/lib/libcublas.so.12"),
            "cuda:targets/x86_64-linux/lib/libcublas.so.12");
  EXPECT_EQ(root("/lib/x86_64-linux-gnu/libc.so.6"), "system:libc.so.6");
  EXPECT_EQ(root("/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40"), "system:openmpi/lib/libmpi.so.40");
  EXPECT_EQ(root("/usr/lib64/libc.so.6"), "system:libc.so.6");
  EXPECT_EQ(root("/usr/bin/python3.11"), "system:python3.11");
  EXPECT_EQ(root("/usr/lib/../lib64/libm.so.6"), "system:libm.so.6");
  EXPECT_EQ(root("/opt/app/lib/libapp.so"), "/opt/app/lib/libapp.so");
  EXPECT_EQ(analysis::WithoutHwcaps("/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libz.so.1", {}),
            "/usr/lib/x86_64-linux-gnu/libz.so.1");
  EXPECT_EQ(analysis::WithoutHwcaps("/opt/l/tls/haswell/libz.so.1", {"tls/haswell", "tls"}),
            "/opt/l/libz.so.1");
  EXPECT_EQ(analysis::WithoutHwcaps("/opt/l/libz.so.1", {"tls"}), "/opt/l/libz.so.1");

  // Two processes of one program (other arguments, another CPU's hwcaps subdirectory):
  // one entry; ld.so, the vDSO and the executable are not libraries of the lock.
  v1::Timeline t;
  uint64_t seq = 0;
  auto process = [&](const std::string& hwcaps, const std::string& arg) {
    auto* p = t.add_processes();
    p->set_pid(static_cast<uint32_t>(100 + t.processes_size()));
    p->set_exe("/usr/bin/python3.11");
    p->add_argv("python3");
    p->add_argv(arg);
    (*p->mutable_env())["VIRTUAL_ENV"] = "/v";
    uint64_t id = 0;
    auto load = [&](v1::LoadReason reason, const std::string& path, const std::string& soname) {
      auto* e = p->add_entries();
      e->set_seq(++seq);
      auto* l = e->mutable_load();
      l->set_reason(reason);
      l->mutable_object()->set_id(++id);
      l->mutable_object()->set_path(path);
      l->mutable_object()->set_soname(soname);
      l->set_build_id("abcd");
      // The model's object table row (timeline.proto's LoadedObject), which analysis reads.
      auto* o = p->add_objects();
      *o->mutable_object() = l->object();
      o->set_load_entry(static_cast<uint32_t>(p->entries_size()));
      o->set_open_seq(seq);
    };
    load(v1::LOAD_EXECUTABLE, "/usr/bin/python3.11", "");
    load(v1::LOAD_INTERPRETER, "/lib64/ld-linux-x86-64.so.2", "ld-linux-x86-64.so.2");
    load(v1::LOAD_VDSO, "linux-vdso.so.1", "linux-vdso.so.1");
    load(v1::LOAD_NEEDED, "/nonexistent/lib" + hwcaps + "/libq'x.so.1.2", "libq'x.so.1");
    load(v1::LOAD_DLOPEN, "/v/lib/python3.11/site-packages/m/_m.so", "");
  };
  process("", "a.py");
  process("/glibc-hwcaps/x86-64-v3", "b.py");
  const v1::Lock lock = analysis::MakeLock(t);
  const std::string text = store::FormatLock(lock);
  EXPECT_EQ(text.substr(text.find("format = 1")),
            "format = 1\n"
            "\n"
            "[program.'system:python3.11']\n"
            "'_m.so' = { root = 'site-packages', file = 'm/_m.so', version = 'unknown', build-id = 'abcd' }\n"
            "'libq\\x27x.so.1' = [{ root = '/', file = '/nonexistent/lib/libq\\x27x.so.1.2', version = '1.2', "
            "build-id = 'abcd' }, { root = '/', file = '/nonexistent/lib/libq\\x27x.so.1.2', version = '1.2', "
            "build-id = 'unknown' }]\n")
      << text;
  // Read back: the same lock, and "unknown" matches the known build-id.
  const Result<v1::Lock> again = store::ParseLock(text, "x.lock");
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->DebugString(), lock.DebugString());
  EXPECT_EQ(analysis::CheckLock(*again, lock, false).differences_size(), 0);
}

}  // namespace
}  // namespace ldscope
