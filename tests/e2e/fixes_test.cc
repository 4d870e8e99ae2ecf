// Fixes applied as the report gives them: each environment, preload and import-order fix
// is read from the JSON report of a traced run, applied verbatim (the variable set to the
// value the fix names, the directory it names dropped from LD_LIBRARY_PATH, the import
// line it names moved above the other), and the program run again under `ldscope run`:
// it must work, and the finding must be gone. Then the same fixes tried by `run
// --try-fixes` itself, its verdicts compared with goldens.
//
// AppliedFixes does the same for every other action a test can apply (files linked,
// renamed or rewritten with patchelf, Python calls edited, objects rebuilt with the flag
// the text names). ActionTable checks that each FixAction is applied there or by a named
// test elsewhere (kAppliedElsewhere), or is one that no test can apply (kNotApplicable,
// each with its reason): installs and pins from a package index, a newer distribution,
// /etc/ld.so.conf.d (the machine's loader configuration), a version comparison, a
// program of another machine, and "none".
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <regex>
#include <sstream>

#include "render/words.h"
#include "support/report_json.h"
#include "support/test_support.h"
#include "ldscope_proto/report.pb.h"

namespace ldscope {
namespace {

namespace fs = std::filesystem;
using testing::RunCmd;

const std::string kFx = FIXTURES;

struct Traced {
  testing::Proc run;
  v1::Report report;
};

// `ldscope run` of argv in cwd with env, its JSON report read back.
Traced TraceAndReport(const std::string& dir, const std::string& name, const std::vector<std::string>& argv,
                      const std::vector<std::string>& env) {
  const std::string report = dir + "/" + name + ".json";
  std::vector<std::string> cmd = {"/usr/bin/env",
                                  "-C",
                                  dir,
                                  LDSCOPE_BIN,
                                  "run",
                                  "-q",
                                  "--format",
                                  "json",
                                  "--report",
                                  report,
                                  "-o",
                                  dir + "/" + name + ".ldscope",
                                  "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  Traced t;
  t.run = RunCmd(cmd, env);
  std::string why;
  EXPECT_TRUE(testing::ParseJson(testing::ReadFile(report), &t.report, &why)) << name << ": " << why;
  return t;
}

size_t Count(const v1::Report& r, v1::FindingKind kind) {
  return std::count_if(r.findings().begin(), r.findings().end(), [&](const auto& f) { return f.kind() == kind; });
}

// The text of the fix of that action in the finding of that kind (which must be there).
std::string FixOf(const Traced& t, v1::FindingKind kind, v1::FixAction action) {
  for (const auto& f : t.report.findings())
    if (f.kind() == kind)
      for (const auto& x : f.fixes())
        if (x.action() == action) return x.text();
  ADD_FAILURE() << "no " << render::EnumWord(action) << " fix of a " << render::EnumWord(kind) << " finding:\n"
                << t.run.err;
  return "";
}

// The first match of re's groups in text, which must be there.
std::smatch Match(const std::string& text, const std::string& re) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex(re))) << re << " in: " << text;
  return m;
}

// "move `import torch` (train.py:4) above `import cupy` (train.py:3), ...", or of two
// loads "move `ctypes.CDLL('/x/libb.so')` (loads.py:4) above `ctypes.CDLL(...)` (loads.py:3)",
// applied to the file (relative to dir): the first line taken out and put in before the
// second. An import is the line itself; a load is said with its arguments' values, so
// only its call is on the line.
void MoveLine(const std::string& dir, const std::string& fix) {
  const std::smatch m = Match(fix, "^move `([^`]+)` \\(([^:)]+):([0-9]+)\\) above `([^`]+)` \\(([^:)]+):([0-9]+)\\)");
  ASSERT_EQ(m.size(), 7u);
  ASSERT_EQ(m[2].str(), m[5].str()) << fix;
  const std::string path = m[2].str().front() == '/' ? m[2].str() : dir + "/" + m[2].str();
  std::vector<std::string> lines;
  std::istringstream in(testing::ReadFile(path));
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const size_t from = std::stoul(m[3]) - 1, to = std::stoul(m[6]) - 1;
  ASSERT_LT(from, lines.size());
  ASSERT_LT(to, from);
  const auto call = [](const std::string& said) { return said.substr(0, said.find('(') + 1); };
  ASSERT_NE(lines[from].find(m[1].str().rfind("import ", 0) == 0 ? m[1].str() : call(m[1])), std::string::npos) << fix;
  ASSERT_NE(lines[to].find(m[4].str().rfind("import ", 0) == 0 ? m[4].str() : call(m[4])), std::string::npos) << fix;
  const std::string moved = lines[from];
  lines.erase(lines.begin() + static_cast<long>(from));
  lines.insert(lines.begin() + static_cast<long>(to), moved);
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  testing::WriteFile(path, out);
}

// "drop DIR from LD_LIBRARY_PATH ...", applied to the environment's LD_LIBRARY_PATH.
std::vector<std::string> DropFromLdLibraryPath(std::vector<std::string> env, const std::string& fix) {
  const std::string dir = Match(fix, "^drop (\\S+) from LD_LIBRARY_PATH")[1];
  for (auto& kv : env) {
    if (kv.rfind("LD_LIBRARY_PATH=", 0) != 0) continue;
    std::string kept;
    std::istringstream in(kv.substr(std::string("LD_LIBRARY_PATH=").size()));
    for (std::string e; std::getline(in, e, ':');)
      if (e != dir) kept += (kept.empty() ? "" : ":") + e;
    EXPECT_NE(kept + ":", kv.substr(std::string("LD_LIBRARY_PATH=").size()) + ":") << dir << " not in " << kv;
    kv = "LD_LIBRARY_PATH=" + kept;
  }
  return env;
}

// The NCCL seed: `import cupy` (which loads the system NCCL 2.16 by path) before `import
// torch`, whose libtorch_cuda.so needs ncclCommRegister from the NCCL its RPATH names.
class SeedFixes : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ScratchDir(std::string("fixes_seed_") +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::copy_file(PYFIXTURES_DIR "/app/train.py", dir_ + "/train.py");
    before_ = TraceAndReport(dir_, "before", {"/usr/bin/python3", "train.py"}, env_);
    ASSERT_EQ(before_.run.code, 1) << before_.run.err;  // the ImportError
    ASSERT_EQ(Count(before_.report, v1::MISSING_SYMBOL), 1u) << before_.run.err;
  }

  // The program imports both and the finding is gone.
  void ExpectFixed(const Traced& after) {
    EXPECT_EQ(after.run.code, 0) << after.run.err;
    EXPECT_NE(after.run.out.find("imported cupy torch"), std::string::npos) << after.run.out;
    EXPECT_EQ(Count(after.report, v1::MISSING_SYMBOL), 0u) << after.run.err;
  }

  std::string dir_;
  std::vector<std::string> env_ = {"PYTHONPATH=" + kFx + "/site-packages"};
  Traced before_;
};

TEST_F(SeedFixes, SwapImports) {
  MoveLine(dir_, FixOf(before_, v1::MISSING_SYMBOL, v1::FIX_SWAP_IMPORTS));
  ExpectFixed(TraceAndReport(dir_, "after", {"/usr/bin/python3", "train.py"}, env_));
}

TEST_F(SeedFixes, PreloadByPath) {
  std::vector<std::string> env = env_;
  env.push_back(Match(FixOf(before_, v1::MISSING_SYMBOL, v1::FIX_PRELOAD_BY_PATH), "(LD_PRELOAD=\\S+)")[1]);
  ExpectFixed(TraceAndReport(dir_, "after", {"/usr/bin/python3", "train.py"}, env));
}

// The seed's two loads as two ctypes calls of one script: the fix moves the second
// above the first.
TEST(LoadOrderFixes, SwapLoads) {
  const std::string dir = testing::ScratchDir("fixes_swap_loads");
  testing::WriteFile(dir + "/loads.py",
                     "import ctypes, os, sys\n"
                     "fx = sys.argv[1]\n"
                     "ctypes.CDLL(fx + \"/system/lib/libnccl.so.2.16.2\")\n"
                     "ctypes.CDLL(fx + \"/site-packages/torch/lib/libtorch_cuda.so\", os.RTLD_NOW)\n"
                     "print(\"loaded both\")\n");
  const std::vector<std::string> argv = {"/usr/bin/python3", "loads.py", kFx};
  const Traced before = TraceAndReport(dir, "before", argv, {});
  ASSERT_EQ(before.run.code, 1) << before.run.err;  // the OSError
  ASSERT_EQ(Count(before.report, v1::MISSING_SYMBOL), 1u) << before.run.err;
  MoveLine(dir, FixOf(before, v1::MISSING_SYMBOL, v1::FIX_SWAP_LOADS));
  const Traced after = TraceAndReport(dir, "after", argv, {});
  EXPECT_EQ(after.run.code, 0) << after.run.err;
  EXPECT_NE(after.run.out.find("loaded both"), std::string::npos) << after.run.out;
  EXPECT_EQ(Count(after.report, v1::MISSING_SYMBOL), 0u) << after.run.err;
}

// Scenarios whose LD_LIBRARY_PATH holds a copy that lacks what a library needs: each
// environment fix the missing-symbol finding gives, applied, lets the load succeed.
struct EnvCase {
  std::string name, script, ok;
  std::vector<std::string> env;
};

void PrintTo(const EnvCase& c, std::ostream* os) { *os << c.name; }

class EnvironmentFixes : public ::testing::TestWithParam<EnvCase> {};

TEST_P(EnvironmentFixes, FindingGone) {
  const EnvCase& c = GetParam();
  const std::vector<std::string> argv = {"/usr/bin/python3", SCENARIOS_DIR "/" + c.script, kFx};
  for (const v1::FixAction action : {v1::FIX_DROP_FROM_LD_LIBRARY_PATH, v1::FIX_PRELOAD_BY_PATH}) {
    SCOPED_TRACE(render::EnumWord(action));
    const std::string dir = testing::ScratchDir("fixes_" + c.name + "_" + render::EnumWord(action));
    const Traced before = TraceAndReport(dir, "before", argv, c.env);
    ASSERT_EQ(Count(before.report, v1::MISSING_SYMBOL), 1u) << before.run.err;
    EXPECT_EQ(before.run.out.find(c.ok), std::string::npos) << before.run.out;
    const std::string fix = FixOf(before, v1::MISSING_SYMBOL, action);
    std::vector<std::string> env = c.env;
    if (action == v1::FIX_DROP_FROM_LD_LIBRARY_PATH)
      env = DropFromLdLibraryPath(env, fix);
    else
      env.push_back(Match(fix, "(LD_PRELOAD=\\S+)")[1]);
    const Traced after = TraceAndReport(dir, "after", argv, env);
    EXPECT_EQ(after.run.code, 0) << after.run.err;
    EXPECT_NE(after.run.out.find(c.ok), std::string::npos) << after.run.out;
    EXPECT_EQ(Count(after.report, v1::MISSING_SYMBOL), 0u) << after.run.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, EnvironmentFixes,
                         ::testing::Values(EnvCase{"nvjitlink",
                                                   "nvjitlink_ld_library_path.py",
                                                   "cusparse: ok",
                                                   {"LD_LIBRARY_PATH=" + kFx + "/cuda-12.1/lib64"}},
                                           EnvCase{"version_not_met",
                                                   "version_not_met.py",
                                                   "veruser: ok",
                                                   {"LD_LIBRARY_PATH=" + kFx + "/ver/old"}}),
                         [](const auto& info) { return info.param.name; });

// `run --try-fixes`: the same fixes, tried by ldscope itself. Each scenario's report
// (text, and JSON for the seed) with the verification under each fix is compared whole
// with its golden; the user's script is never written, and the trials' directory is
// under the test's own ($TMPDIR).
struct TryCase {
  std::string name;
  std::vector<std::string> argv;  // run in the scratch directory
  std::vector<std::string> env;
  int code;  // the command's own status, which run passes on
  bool json = false;
};

void PrintTo(const TryCase& c, std::ostream* os) { *os << c.name; }

class TryFixes : public ::testing::TestWithParam<TryCase> {};

TEST_P(TryFixes, Verified) {
  const TryCase& c = GetParam();
  const std::string dir = testing::ScratchDir("fixes_try_" + c.name);
  fs::copy_file(PYFIXTURES_DIR "/app/train.py", dir + "/train.py");
  testing::WriteFile(dir + "/loads.py",
                     "import ctypes, os, sys\n"
                     "fx = sys.argv[1]\n"
                     "ctypes.CDLL(fx + \"/system/lib/libnccl.so.2.16.2\")\n"
                     "ctypes.CDLL(fx + \"/site-packages/torch/lib/libtorch_cuda.so\", os.RTLD_NOW)\n"
                     "print(\"loaded both\")\n");
  // The same two loads, then a long wait: a trial whose load works runs into the limit.
  testing::WriteFile(dir + "/loads_wait.py",
                     "import ctypes, os, sys, time\n"
                     "fx = sys.argv[1]\n"
                     "ctypes.CDLL(fx + \"/system/lib/libnccl.so.2.16.2\")\n"
                     "ctypes.CDLL(fx + \"/site-packages/torch/lib/libtorch_cuda.so\", os.RTLD_NOW)\n"
                     "time.sleep(600)\n");
  const std::string train = testing::ReadFile(dir + "/train.py"), loads = testing::ReadFile(dir + "/loads.py");
  std::vector<std::string> env = c.env;
  env.push_back("TMPDIR=" + dir);  // the trials' directory
  for (const std::string format : {"text", "json"}) {
    if (format == "json" && !c.json) continue;
    const std::string report = dir + "/report." + format;
    std::vector<std::string> cmd = {"/usr/bin/env", "-C", dir, LDSCOPE_BIN, "run", "-q", "--try-fixes"};
    cmd.insert(cmd.end(), {"--format", format, "--report", report, "-o", dir + "/run.ldscope", "--"});
    cmd.insert(cmd.end(), c.argv.begin(), c.argv.end());
    const testing::Proc p = RunCmd(cmd, env);
    EXPECT_EQ(p.code, c.code) << p.err;
    EXPECT_NE(p.err.find("--try-fixes: "), std::string::npos) << p.err;
    testing::ExpectGolden("try_fixes_" + c.name + "." + (format == "text" ? "txt" : "json"), testing::ReadFile(report));
  }
  EXPECT_EQ(testing::ReadFile(dir + "/train.py"), train);
  EXPECT_EQ(testing::ReadFile(dir + "/loads.py"), loads);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, TryFixes,
    ::testing::Values(
        // The seed: swap-imports and preload-by-path.
        TryCase{"seed", {"/usr/bin/python3", "train.py"}, {"PYTHONPATH=" + kFx + "/site-packages"}, 1, true},
        // swap-loads: two ctypes loads of one script.
        TryCase{"swap_loads", {"/usr/bin/python3", "loads.py", kFx}, {}, 1},
        // drop-from-ld-library-path and preload-by-path.
        TryCase{"nvjitlink",
                {"/usr/bin/python3", SCENARIOS_DIR "/nvjitlink_ld_library_path.py", kFx},
                {"LD_LIBRARY_PATH=" + kFx + "/cuda-12.1/lib64"},
                0},
        TryCase{"version_not_met",
                {"/usr/bin/python3", SCENARIOS_DIR "/version_not_met.py", kFx},
                {"LD_LIBRARY_PATH=" + kFx + "/ver/old"},
                0},
        // The load to move is the body of a `try:`: the fix moves the whole statement,
        // clauses and all (the line alone would be an IndentationError); both fixes clear it.
        TryCase{"line_in_block", {"/usr/bin/python3", SCENARIOS_DIR "/cupy_then_torch.py", kFx}, {}, 0},
        // Not cleared: without LD_LIBRARY_PATH's old libver.so.1 the dlopen still fails,
        // now on a missing library (the fix's "if another copy should serve it").
        TryCase{"fall_through",
                {DLPROBE, "open", kFx + "/classes/fall/app/libfalluser.so"},
                {"LD_LIBRARY_PATH=" + kFx + "/ver/old"},
                0},
        // Static TLS: the late library preloaded, and the surplus enlarged by the tunable.
        TryCase{"static_tls",
                {DLPROBE, "open", kFx + "/classes/loadcheck/initial-exec/libtls_a.so", "open",
                 kFx + "/classes/loadcheck/initial-exec/libtls_b.so"},
                {},
                0,
                true},
        // The same with GLIBC_TUNABLES set: the fix keeps the other tunables and replaces
        // optional_static_tls rather than repeating it.
        TryCase{"tls_tunables",
                {DLPROBE, "open", kFx + "/classes/loadcheck/initial-exec/libtls_a.so", "open",
                 kFx + "/classes/loadcheck/initial-exec/libtls_b.so"},
                {"GLIBC_TUNABLES=glibc.malloc.perturb=0:glibc.rtld.optional_static_tls=512"},
                0},
        // Static TLS, where the preload of the late library makes another fail under the
        // trace only (the audit module's layout takes start-up TLS from the surplus): the
        // trial proves nothing traced, so the command runs again untraced with the change.
        TryCase{"tls_traced",
                {DLPROBE, "must", kFx + "/classes/loadcheck/initial-exec/libtls_a.so", "must",
                 kFx + "/classes/loadcheck/initial-exec/libtls_big.so"},
                {},
                1},
        // With libtls_a preloaded: the tunable sized for the untraced layout leaves the late
        // library failing under the trace only (its own finding, at info level).
        TryCase{"tls_preloaded",
                {DLPROBE, "must", kFx + "/classes/loadcheck/initial-exec/libtls_big.so"},
                {"LD_PRELOAD=" + kFx + "/classes/loadcheck/initial-exec/libtls_a.so"},
                1},
        // A missing library: LD_LIBRARY_PATH naming the directory the loader's rules put out
        // of reach (-z nodefaultlib; $ORIGIN of a symbolic link).
        TryCase{"nodeflib", {kFx + "/classes/search/nodeflib/exe_a"}, {}, 127},
        TryCase{"origin_symlink", {kFx + "/classes/search/origin/exe"}, {}, 127},
        // The CUDA toolkit's stub: found through LD_LIBRARY_PATH (without it nothing serves
        // the dlopen: a missing library comes instead), and preloaded (dropped from
        // LD_PRELOAD, the probe's own library loads).
        TryCase{"cuda_stub",
                {DLPROBE, "open", "libcuda.so"},
                {"LD_LIBRARY_PATH=" + kFx + "/classes/cuda/toolkit/lib64/stubs",
                 "LDSCOPE_NVIDIA_VERSION_FILE=" + kFx + "/classes/cuda/nvidia/absent"},
                0},
        TryCase{"cuda_stub_preloaded",
                {DLPROBE, "open", kFx + "/lib/libfix_b.so"},
                {"LD_PRELOAD=" + kFx + "/classes/cuda/toolkit/lib64/stubs/libcuda.so",
                 "LDSCOPE_NVIDIA_VERSION_FILE=" + kFx + "/classes/cuda/nvidia/absent"},
                0,
                true},
        // Cleared at the limit (10 s: the command failed at once): each trial is stopped.
        TryCase{"stopped_at_limit", {"/usr/bin/python3", "loads_wait.py", kFx}, {}, 1}),
    [](const auto& info) { return info.param.name; });

// ---- Every action, applied as its text says ----
// For each action a test can apply, a class fixture (copied into a scratch directory
// where the fix changes files, so that the fix names the copy) is traced, the fix of that
// action read from the JSON report and applied verbatim: a variable set to the value the
// text names, a link made, a file renamed, the patchelf command run, a line of a Python
// script edited as the text says, or an object rebuilt from the fixture's source with the
// flag the text names. The text is matched with a regex where no structured field holds
// the change, so a change of its wording fails here. Then the command runs again under
// `ldscope run`: it must work and the finding must be gone.

// The command's working state as the fixes change it.
struct Applying {
  std::string dir;                // the scratch directory: the copy, the traces
  std::vector<std::string> argv;  // the command
  std::vector<std::string> env;
};

using Applier = std::function<void(const std::string& fix, Applying* a)>;

struct ApplyCase {
  std::string name;
  v1::FixAction action;
  v1::FindingKind kind;
  std::vector<std::string> trees;  // fixture directories (under FIXTURES) copied into dir
  std::function<std::vector<std::string>(const std::string& dir)> argv;
  std::vector<std::string> env;
  int before_code, after_code;  // the command's status without and with the fix
  std::string ok;               // what the command prints once it works (and not before, unless works_before)
  Applier apply;
  bool works_before = false;      // the finding is a warning: the command worked without the fix
  bool load_fails_after = false;  // the fix is to do without what failed: its load still fails
  // A directory under the scratch directory that holds the copied trees (and is the
  // argv's dir): a name the shell must be given quoted, for fixes that are commands.
  std::string nest = "";
};

void PrintTo(const ApplyCase& c, std::ostream* os) { *os << c.name; }

void Sh(const std::string& command) {
  const testing::Proc p = RunCmd({"/bin/sh", "-c", command});
  ASSERT_EQ(p.code, 0) << command << ": " << p.err;
}

void Compile(const std::vector<std::string>& argv) {
  const testing::Proc p = RunCmd(argv);
  ASSERT_EQ(p.code, 0) << p.err;
}

// The variable the text names ("NAME=value", no spaces) added to the environment.
Applier SetFromText(const std::string& variable) {
  return
      [variable](const std::string& fix, Applying* a) { a->env.push_back(Match(fix, "(" + variable + "=\\S+)")[1]); };
}

// Each `patchelf ...` command the text names, run as it is written.
void RunPatchelf(const std::string& fix, const std::string& re) {
  size_t n = 0;
  const std::regex command(re);
  for (std::sregex_iterator it(fix.begin(), fix.end(), command), end; it != end; ++it, ++n)
    ASSERT_NO_FATAL_FAILURE(Sh((*it)[1].str()));
  EXPECT_GT(n, 0u) << re << " in: " << fix;
}

// Line `line` (from 1) of the script at path, changed by edit.
void EditLine(const std::string& path, size_t line, const std::function<std::string(std::string)>& edit) {
  std::vector<std::string> lines;
  std::istringstream in(testing::ReadFile(path));
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_GE(line, 1u);
  ASSERT_LE(line, lines.size()) << path;
  lines[line - 1] = edit(lines[line - 1]);
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  testing::WriteFile(path, out);
}

// The line of the script at path that holds both strings (which one must).
size_t LineWith(const std::string& path, const std::string& a, const std::string& b) {
  std::istringstream in(testing::ReadFile(path));
  size_t n = 0;
  for (std::string l; std::getline(in, l);) {
    ++n;
    if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return n;
  }
  ADD_FAILURE() << "no line of " << path << " holds " << a << " and " << b;
  return 0;
}

const std::string kSearch = kFx + "/classes/search";

// The runpath fixture's program, in the case's copy of it.
std::vector<std::string> OpenRunpathApp(const std::string& dir) {
  return {DLPROBE, "open", dir + "/runpath/app/libapp.so"};
}

// A program that defines fx_crc32, dlopens the library its first argument names and
// calls the function its second names.
const char kInterposingApp[] =
    "#include <dlfcn.h>\n"
    "#include <stdio.h>\n"
    "int fx_crc32(void) { return 7; }\n"
    "int main(int argc, char** argv) {\n"
    "  void* h = argc > 2 ? dlopen(argv[1], RTLD_NOW) : 0;\n"
    "  int (*init)(void) = h ? (int (*)(void))dlsym(h, argv[2]) : 0;\n"
    "  if (!init) { printf(\"plugin: failed: %s\\n\", dlerror()); return 1; }\n"
    "  printf(\"%s: %d\\n\", argv[2], init());\n"
    "  return 0;\n"
    "}\n";

std::vector<ApplyCase> ApplyCasesInFixtureDirs();

// Each case, and the commands among them run again in a directory named with a space and
// a quote, which the fix's command must quote for the shell.
std::vector<ApplyCase> ApplyCases() {
  std::vector<ApplyCase> cases = ApplyCasesInFixtureDirs();
  for (const char* name : {"set_rpath", "relink"}) {
    ApplyCase quoted = *std::find_if(cases.begin(), cases.end(), [&](const ApplyCase& c) { return c.name == name; });
    quoted.name += "_quoted_dir";
    quoted.nest = "it's a dir";
    cases.push_back(std::move(quoted));
  }
  return cases;
}

std::vector<ApplyCase> ApplyCasesInFixtureDirs() {
  const auto fixed = [](std::vector<std::string> argv) { return [argv](const std::string&) { return argv; }; };
  const std::string tls = kFx + "/classes/loadcheck/initial-exec";
  return {
      // "LD_LIBRARY_PATH=/lib/x86_64-linux-gnu (searched whatever the flag; ...)".
      {"set_variable",
       v1::FIX_SET_VARIABLE,
       v1::MISSING_LIBRARY,
       {},
       fixed({kSearch + "/nodeflib/exe_a"}),
       {},
       127,
       0,
       "",
       SetFromText("LD_LIBRARY_PATH")},
      // "or enlarge the surplus: GLIBC_TUNABLES=glibc.rtld.optional_static_tls=896".
      {"set_tunable",
       v1::FIX_SET_TUNABLE,
       v1::STATIC_TLS_EXHAUSTED,
       {},
       fixed({DLPROBE, "open", tls + "/libtls_a.so", "open", tls + "/libtls_b.so"}),
       {},
       0,
       0,
       "libtls_b.so: ok",
       SetFromText("GLIBC_TUNABLES")},
      // "or preload the copy that offers version VER_2: LD_PRELOAD=...".
      {"preload_by_path",
       v1::FIX_PRELOAD_BY_PATH,
       v1::MISSING_SYMBOL,
       {},
       fixed({kFx + "/classes/loadcheck/symver/exe_v2"}),
       {},
       1,
       0,
       "",
       SetFromText("LD_PRELOAD")},
      // "give LD_PRELOAD the library the script names instead: PATH": a GNU ld script
      // preloaded, the library it names (found on LD_LIBRARY_PATH) in its place.
      {"preload_by_path_script",
       v1::FIX_PRELOAD_BY_PATH,
       v1::PRELOAD_IGNORED,
       {},
       fixed({DLPROBE, "open", kFx + "/lib/libfix_b.so"}),
       {"LD_PRELOAD=" + kSearch + "/script/libsf_util.so", "LD_LIBRARY_PATH=" + kSearch + "/opt"},
       0,
       0,
       "libfix_b.so: ok",
       [](const std::string& fix, Applying* a) {
         const std::string real = Match(fix, "^give LD_PRELOAD the library the script names instead: (\\S+)$")[1];
         for (auto& kv : a->env)
           if (kv.rfind("LD_PRELOAD=", 0) == 0) kv = "LD_PRELOAD=" + real;
       },
       true},
      // "drop DIR from LD_LIBRARY_PATH (its libver.so.1 lacks ...)".
      {"drop_from_ld_library_path",
       v1::FIX_DROP_FROM_LD_LIBRARY_PATH,
       v1::MISSING_SYMBOL,
       {},
       fixed({"/usr/bin/python3", SCENARIOS_DIR "/version_not_met.py", kFx}),
       {"LD_LIBRARY_PATH=" + kFx + "/ver/old"},
       0,
       0,
       "veruser: ok",
       [](const std::string& fix, Applying* a) { a->env = DropFromLdLibraryPath(a->env, fix); }},
      // "or remove libsf_x.so from LD_PRELOAD": the other entry kept.
      {"drop_from_ld_preload",
       v1::FIX_DROP_FROM_LD_PRELOAD,
       v1::PRELOAD_IGNORED,
       {},
       fixed({DLPROBE, "open", kFx + "/lib/libfix_b.so"}),
       {"LD_PRELOAD=libsf_x.so:" + kFx + "/lib/libfix_a.so"},
       0,
       0,
       "libfix_b.so: ok",
       [](const std::string& fix, Applying* a) {
         const std::string entry = Match(fix, "^or remove (\\S+) from LD_PRELOAD$")[1];
         for (auto& kv : a->env) {
           if (kv.rfind("LD_PRELOAD=", 0) != 0) continue;
           std::string kept;
           std::istringstream in(kv.substr(std::string("LD_PRELOAD=").size()));
           for (std::string e; std::getline(in, e, ':');)
             if (e != entry) kept += (kept.empty() ? "" : ":") + e;
           kv = "LD_PRELOAD=" + kept;
         }
       },
       true},
      // "put libf.so beside the link: ln -s A B": the link made.
      {"add_symlink",
       v1::FIX_ADD_SYMLINK,
       v1::MISSING_LIBRARY,
       {"classes/search/origin"},
       [](const std::string& dir) { return std::vector<std::string>{dir + "/origin/exe"}; },
       {},
       127,
       0,
       "",
       [](const std::string& fix, Applying*) {
         const std::smatch m = Match(fix, ": ln -s (\\S+) (\\S+)$");
         fs::create_symlink(m[1].str(), m[2].str());
       }},
      // "or, if the program is meant to run without the plugin, remove PATH so that nothing
      // tries to load it": renamed; the probe then finds no plugin, which it goes on without.
      {"remove",
       v1::FIX_REMOVE,
       v1::DLOPEN_REJECTED,
       {"classes/plugin"},
       fixed({DLPROBE, "open", "libnccl-net.so"}),
       {"LD_LIBRARY_PATH=@DIR@/plugin/nccl"},
       0,
       0,
       "libnccl-net.so: cannot open shared object file",
       [](const std::string& fix, Applying* a) {
         const std::string path = Match(fix, "remove (\\S+) so that nothing tries to load it$")[1];
         ASSERT_EQ(path.rfind(a->dir + "/", 0), 0u) << path;
         fs::rename(path, path + ".removed");
       },
       false,
       true},
      // "patchelf --force-rpath --set-rpath 'DIR' PATH", run.
      {"set_rpath",
       v1::FIX_SET_RPATH,
       v1::EMPTY_PATH_ELEMENT,
       {"classes/search/app", "classes/search/work"},
       [](const std::string& dir) {
         return std::vector<std::string>{DLPROBE, "open", dir + "/app/libsf_rpath.so"};
       },
       {},
       0,
       0,
       "libsf_rpath.so: ok",
       [](const std::string& fix, Applying*) { RunPatchelf(fix, "^(patchelf .*)$"); },
       true},
      // "or relink exe_a without -z nodefaultlib, or give it a RUNPATH that holds DIR:
      // patchelf --add-rpath DIR PATH", run.
      {"relink",
       v1::FIX_RELINK,
       v1::MISSING_LIBRARY,
       {"classes/search/nodeflib"},
       [](const std::string& dir) { return std::vector<std::string>{dir + "/nodeflib/exe_a"}; },
       {},
       127,
       0,
       "",
       [](const std::string& fix, Applying*) { RunPatchelf(fix, ": (patchelf --add-rpath .+)$"); }},
      // "or relink exe_a without -z nodefaultlib, ...": exe_a linked again from the
      // fixture's source with the fixture's link options, less the one the text names.
      {"relink_without_flag",
       v1::FIX_RELINK,
       v1::MISSING_LIBRARY,
       {"classes/search/nodeflib"},
       [](const std::string& dir) { return std::vector<std::string>{dir + "/nodeflib/exe_a"}; },
       {},
       127,
       0,
       "",
       [](const std::string& fix, Applying* a) {
         const std::smatch m = Match(fix, "^or relink (\\S+) without -z (\\S+),");
         ASSERT_EQ(m[1].str(), "exe_a");
         const std::string lib = a->dir + "/nodeflib/";
         std::vector<std::string> cc = {CC_BIN,
                                        "-DSEARCH_CALL=f",
                                        "-DSEARCH_CALL2=g",
                                        "-o",
                                        lib + "exe_a",
                                        FIXTURE_SRC "/search_main.c",
                                        "-Wl,-z,nodefaultlib",
                                        "-Wl,--enable-new-dtags",
                                        "-Wl,--no-as-needed",
                                        lib + "lib_nodefaultlib.so",
                                        lib + "lib_defaultlib.so",
                                        "-Wl,-rpath,$ORIGIN"};
         const auto flag = std::find(cc.begin(), cc.end(), "-Wl,-z," + m[2].str());
         ASSERT_NE(flag, cc.end()) << fix;
         cc.erase(flag);
         ASSERT_NO_FATAL_FAILURE(Compile(cc));
       }},
      // "give libframework.so a RUNPATH of its own that holds libbackend.so: patchelf
      // --add-rpath '$ORIGIN' PATH", run.
      {"set_runpath",
       v1::FIX_SET_RUNPATH,
       v1::RUNPATH_NOT_INHERITED,
       {"classes/runpath"},
       OpenRunpathApp,
       {},
       0,
       0,
       "constructor: dlopen libbackend.so: ok",
       [](const std::string& fix, Applying*) { RunPatchelf(fix, ": (patchelf --add-rpath '\\$ORIGIN' \\S+)$"); }},
      // "or have libframework.so dlopen PATH by its full path": libframework.so rebuilt
      // with that path in its constructor's dlopen.
      {"dlopen_by_path",
       v1::FIX_DLOPEN_BY_PATH,
       v1::RUNPATH_NOT_INHERITED,
       {"classes/runpath"},
       OpenRunpathApp,
       {},
       0,
       0,
       "libbackend.so: ok",
       [](const std::string& fix, Applying* a) {
         const std::smatch m = Match(fix, "^or have (\\S+) dlopen (\\S+) by its full path$");
         ASSERT_EQ(m[1].str(), "libframework.so");
         ASSERT_NO_FATAL_FAILURE(Compile({CC_BIN, "-shared", "-fPIC", "-w", "-DFIX_NAME=framework_init",
                                          "-DFIX_CTOR_DLOPEN=\"" + m[2].str() + "\"", "-Wl,-soname,libframework.so",
                                          "-o", a->dir + "/runpath/lib/libframework.so", FIXTURE_SRC "/fix.c"}));
       }},
      // "or link libapp.so with an RPATH instead of a RUNPATH (-Wl,--disable-new-dtags),
      // which objects it loads inherit": libapp.so linked again, with its own search path
      // and that flag.
      {"link_rpath",
       v1::FIX_LINK_RPATH,
       v1::RUNPATH_NOT_INHERITED,
       {"classes/runpath"},
       OpenRunpathApp,
       {},
       0,
       0,
       "constructor: dlopen libbackend.so: ok",
       [](const std::string& fix, Applying* a) {
         const std::smatch m = Match(fix, "^or link (\\S+) with an RPATH instead of a RUNPATH \\((-Wl,\\S+)\\)");
         ASSERT_EQ(m[1].str(), "libapp.so");
         ASSERT_NO_FATAL_FAILURE(Compile(
             {CC_BIN, "-shared", "-fPIC", "-w", "-DFIX_NAME=app_init", "-DFIX_NEEDS=framework_init",
              "-Wl,-soname,libapp.so", m[2].str(), "-Wl,-rpath,$ORIGIN/../lib", "-o", a->dir + "/runpath/app/libapp.so",
              FIXTURE_SRC "/fix.c", "-Wl,--no-as-needed", a->dir + "/runpath/lib/libframework.so"}));
       }},
      // "or link libconsumer.so against libprovider.so (a DT_NEEDED entry: patchelf
      // --add-needed ...), with a RUNPATH that finds it (patchelf --add-rpath ...)": both run.
      {"add_needed",
       v1::FIX_ADD_NEEDED,
       v1::DLOPEN_OUT_OF_SCOPE,
       {"classes/scope"},
       [](const std::string& dir) {
         return std::vector<std::string>{DLPROBE, "open", dir + "/scope/provider/libprovider.so", "open",
                                         dir + "/scope/consumer/libconsumer.so"};
       },
       {},
       0,
       0,
       "libconsumer.so: ok",
       [](const std::string& fix, Applying*) { RunPatchelf(fix, "(patchelf --add-(?:needed|rpath) \\S+ [^\\s)]+)"); }},
      // "make PATH load in the search ... dlopen libsf_util.so.1 (the library the script
      // names) instead of libsf_util.so": the command given that name.
      {"load_by_path",
       v1::FIX_LOAD_BY_PATH,
       v1::NOT_A_LIBRARY,
       {},
       fixed({DLPROBE, "open", "libsf_util.so"}),
       {"LD_LIBRARY_PATH=" + kSearch + "/script:" + kSearch + "/opt"},
       0,
       0,
       "libsf_util.so.1: ok",
       [](const std::string& fix, Applying* a) {
         const std::smatch m = Match(fix, "^dlopen (\\S+) \\(the library the script names\\) instead of (\\S+)$");
         ASSERT_EQ(a->argv.back(), m[2].str());
         a->argv.back() = m[1].str();
       }},
      // "load PATH with RTLD_GLOBAL where it is loaded now (by ctypes.CDLL('PATH') at
      // SCRIPT:LINE): ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)": that call, given the mode.
      {"load_rtld_global",
       v1::FIX_LOAD_RTLD_GLOBAL,
       v1::DLOPEN_OUT_OF_SCOPE,
       {},
       [](const std::string& dir) {
         fs::copy_file(SCENARIOS_DIR "/failed_dlopen_local_scope.py", dir + "/scope.py");
         return std::vector<std::string>{"/usr/bin/python3", dir + "/scope.py", kFx};
       },
       {},
       0,
       0,
       "libconsumer.so: loaded",
       [](const std::string& fix, Applying* a) {
         const std::smatch m =
             Match(fix,
                   "\\(by ctypes\\.CDLL\\('[^']*'\\) at (\\S+):([0-9]+)\\): ctypes\\.CDLL\\(path, (mode=ctypes\\."
                   "RTLD_GLOBAL)\\)$");
         ASSERT_EQ(m[1].str(), "scope.py");  // relative to the working directory, the scratch one
         const std::string mode = m[3];
         EditLine(a->dir + "/" + m[1].str(), std::stoul(m[2]), [&](std::string l) {
           EXPECT_EQ(l.rfind("ctypes.CDLL(", 0), 0u) << l;
           return l.insert(l.rfind(')'), ", " + mode);
         });
       }},
      // "load libhog.so without RTLD_GLOBAL (RTLD_LOCAL, ctypes' default mode), ...": the
      // mode taken out of the call that loads it.
      {"load_rtld_local",
       v1::FIX_LOAD_RTLD_LOCAL,
       v1::SYMBOL_INTERPOSITION,
       {},
       [](const std::string& dir) {
         fs::copy_file(SCENARIOS_DIR "/interposition_rtld_global.py", dir + "/interpose.py");
         return std::vector<std::string>{"/usr/bin/python3", dir + "/interpose.py", kFx};
       },
       {},
       0,
       0,
       "plugin_init:",
       [](const std::string& fix, Applying* a) {
         const std::string lib =
             Match(fix, "^load (\\S+) without RTLD_GLOBAL \\(RTLD_LOCAL, ctypes' default mode\\)")[1];
         const std::string script = a->dir + "/interpose.py", global = ", mode=os.RTLD_GLOBAL";
         EditLine(script, LineWith(script, "/" + lib + "\"", global),
                  [&](std::string l) { return l.erase(l.find(global), global.size()); });
       },
       true},
      // "load libcuda.so.1 by name, not by the path PATH, so that the kernel driver's own
      // libcuda.so.1 (535...) is used": the command given the name, which finds the
      // driver's copy (classes/driver, on LD_LIBRARY_PATH as a driver's directory is).
      {"load_by_name",
       v1::FIX_LOAD_BY_NAME,
       v1::CUDA_DRIVER,
       {},
       fixed({DLPROBE, "open", kFx + "/classes/cuda/compat/libcuda.so.1"}),
       {"LD_LIBRARY_PATH=" + kFx + "/classes/driver",
        "LDSCOPE_NVIDIA_VERSION_FILE=" + kFx + "/classes/cuda/nvidia/proc-version-535"},
       0,
       0,
       "open libcuda.so.1: ok",
       [](const std::string& fix, Applying* a) {
         const std::smatch m = Match(fix, "^load (\\S+) by name, not by the path (\\S+), so that");
         ASSERT_EQ(a->argv.back(), m[2].str());
         a->argv.back() = m[1].str();
       }},
      // "build app without exporting fx_crc32 (-fvisibility=hidden, or a version script),
      // ...": a program that exports its own fx_crc32 (-rdynamic) and dlopens
      // libplugin.so, whose libfxcrc.so.1 defines it too; rebuilt with that flag, the
      // plugin's call reaches its own copy (46, where the program's gives 52).
      {"hide_symbols",
       v1::FIX_HIDE_SYMBOLS,
       v1::SYMBOL_INTERPOSITION,
       {},
       [](const std::string& dir) {
         testing::WriteFile(dir + "/app.c", kInterposingApp);
         Compile({CC_BIN, "-rdynamic", "-o", dir + "/app", dir + "/app.c", "-ldl"});
         return std::vector<std::string>{dir + "/app", kFx + "/classes/interpose/plugin/libplugin.so", "plugin_init"};
       },
       {},
       0,
       0,
       "plugin_init: 46",
       // The whole text: relinking libfxcrc.so.1 with -Bsymbolic (which this fix offered)
       // leaves libplugin.so's call bound to the program's fx_crc32.
       [](const std::string& fix, Applying* a) {
         const std::smatch m = Match(fix,
                                     "^build (\\S+) without exporting fx_crc32 \\((-fvisibility=hidden), or a "
                                     "version script\\)$");
         ASSERT_EQ(m[1].str(), "app");
         ASSERT_NO_FATAL_FAILURE(
             Compile({CC_BIN, "-rdynamic", m[2].str(), "-o", a->dir + "/app", a->dir + "/app.c", "-ldl"}));
       }},
  };
}

class AppliedFixes : public ::testing::TestWithParam<ApplyCase> {};

TEST_P(AppliedFixes, FindingGoneProgramWorks) {
  const ApplyCase& c = GetParam();
  Applying a;
  a.dir = testing::ScratchDir("fixes_applied_" + c.name);
  if (!c.nest.empty()) {
    a.dir += "/" + c.nest;
    fs::create_directories(a.dir);
  }
  for (const std::string& tree : c.trees)
    fs::copy(kFx + "/" + tree, a.dir + "/" + fs::path(tree).filename().string(),
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  a.argv = c.argv(a.dir);
  for (std::string kv : c.env) {  // @DIR@: the scratch directory
    if (const size_t at = kv.find("@DIR@"); at != std::string::npos) kv.replace(at, 5, a.dir);
    a.env.push_back(kv);
  }
  const Traced before = TraceAndReport(a.dir, "before", a.argv, a.env);
  EXPECT_EQ(before.run.code, c.before_code) << before.run.err;
  ASSERT_GE(Count(before.report, c.kind), 1u) << before.run.err;
  if (!c.ok.empty() && !c.works_before) {
    EXPECT_EQ(before.run.out.find(c.ok), std::string::npos) << before.run.out;
  }
  const std::string fix = FixOf(before, c.kind, c.action);
  ASSERT_FALSE(fix.empty());
  ASSERT_NO_FATAL_FAILURE(c.apply(fix, &a)) << fix;
  // The change as data (Fix.env), where the fix has it, is the one its text made.
  for (const auto& f : before.report.findings())
    for (const auto& x : f.fixes()) {
      if (f.kind() != c.kind || x.text() != fix || !x.has_env()) continue;
      const std::string var = x.env().variable() + "=";
      const auto set = std::find_if(a.env.begin(), a.env.end(), [&](const auto& kv) { return kv.rfind(var, 0) == 0; });
      if (x.env().value().empty()) {
        EXPECT_TRUE(set == a.env.end() || *set == var) << fix;
      } else {
        ASSERT_NE(set, a.env.end()) << fix;
        EXPECT_EQ(*set, var + x.env().value()) << fix;
      }
    }
  const Traced after = TraceAndReport(a.dir, "after", a.argv, a.env);
  EXPECT_EQ(after.run.code, c.after_code) << fix << "\n" << after.run.err;
  if (!c.ok.empty()) {
    EXPECT_NE(after.run.out.find(c.ok), std::string::npos) << fix << "\n" << after.run.out;
  }
  if (!c.load_fails_after) {
    EXPECT_EQ(after.run.out.find("failed"), std::string::npos) << fix << "\n" << after.run.out;
  }
  EXPECT_EQ(Count(after.report, c.kind), 0u) << fix << "\n" << after.run.err;
  for (const auto& f : after.report.findings()) EXPECT_NE(f.severity(), v1::ERROR) << fix << "\n" << f.message();
}

INSTANTIATE_TEST_SUITE_P(Actions, AppliedFixes, ::testing::ValuesIn(ApplyCases()),
                         [](const auto& info) { return info.param.name; });

// "or move PATH to a directory on another mount", applied where the noexec mount is: a
// tmpfs mounted noexec in a mount namespace of the test's own (unshare -m: the tests run
// as root), as classes_test's NoexecMount makes it. The path is taken from the text
// report by sed, moved to the scratch directory (another mount), and loaded from there.
TEST(MountFixes, MoveOffTheNoexecMount) {
  const std::string dir = testing::ScratchDir("fixes_applied_move");
  const std::string mnt = dir + "/nx";
  fs::create_directories(mnt);
  fs::create_directories(dir + "/moved");
  const std::string script =
      "mount -t tmpfs -o noexec,nosuid,nodev tmpfs \"$1\" && cp \"$2\" \"$1\"/libfix_b.so && "
      "\"$3\" run -q --report \"$4\"/before.txt -o \"$4\"/before.ldscope -- \"$5\" open \"$1\"/libfix_b.so && "
      "from=$(sed -n 's/^  fix: or move \\([^ ]*\\) to a directory on another mount$/\\1/p' \"$4\"/before.txt) && "
      "echo \"moving $from\" && mv \"$from\" \"$4\"/moved/ && "
      "\"$3\" run -q --format json --report \"$4\"/after.json -o \"$4\"/after.ldscope -- \"$5\" open "
      "\"$4\"/moved/libfix_b.so";
  const testing::Proc r = RunCmd({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script, "sh", mnt,
                                  kFx + "/lib/libfix_b.so", LDSCOPE_BIN, dir, DLPROBE});
  ASSERT_EQ(r.code, 0) << "unshare -m and a tmpfs mount need root: " << r.err;
  EXPECT_NE(r.out.find("open " + mnt + "/libfix_b.so: failed: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("moving " + mnt + "/libfix_b.so\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("open " + dir + "/moved/libfix_b.so: ok"), std::string::npos) << r.out;
  EXPECT_NE(testing::ReadFile(dir + "/before.txt").find("warning[map-failed]"), std::string::npos);
  v1::Report after;
  std::string why;
  ASSERT_TRUE(testing::ParseJson(testing::ReadFile(dir + "/after.json"), &after, &why)) << why;
  EXPECT_EQ(after.findings_size(), 0) << r.err;
}

// ---- Every action applied, or excused ----
// The actions applied by a test of another suite (or of this file outside the table):
// the test, as "FILE: TEST(SUITE, NAME)" or "FILE: TEST_P(SUITE, NAME)", which the file
// must hold.
const std::map<v1::FixAction, std::string> kAppliedElsewhere = {
    {v1::FIX_SWAP_IMPORTS, "tests/e2e/fixes_test.cc: TEST_F(SeedFixes, SwapImports)"},
    {v1::FIX_SWAP_LOADS, "tests/e2e/fixes_test.cc: TEST(LoadOrderFixes, SwapLoads)"},
    {v1::FIX_REMOUNT, "tests/e2e/classes_test.cc: TEST(SearchFixes, NoexecMount)"},
    {v1::FIX_MOVE, "tests/e2e/fixes_test.cc: TEST(MountFixes, MoveOffTheNoexecMount)"},
    {v1::FIX_OLDER_GLIBC_BUILD, "tests/e2e/classes_test.cc: TEST(LoadCheckFixes, NewerGlibcBuildHere)"},
    {v1::FIX_REBUILD_CXX_ABI, "tests/e2e/classes_test.cc: TEST(ClassFixes, CxxAbiRebuildWithTheHostsAbi)"},
    {v1::FIX_REBUILD_AGAINST_HOST,
     "tests/e2e/classes_test.cc: TEST(ClassFixes, HostVersionRebuildAgainstTheLoadedHost)"},
    {v1::FIX_REBUILD_FOR_PYTHON,
     "tests/e2e/classes_test.cc: TEST(ClassFixes, PythonApiRebuildWithThisInterpretersHeaders)"},
    {v1::FIX_EXPORT_SYMBOL, "tests/e2e/classes_test.cc: TEST(ClassFixes, NotExportedHiddenExport)"},
    // glibc 2.41 (the trixie sysroot) refuses the executable stack that 2.36 grants.
    {v1::FIX_REBUILD_NOEXECSTACK, "tests/glibc/glibc_test.cc: TEST(ExecStackRefused, TrixieAndTheFixes)"},
    {v1::FIX_CLEAR_EXECSTACK, "tests/glibc/glibc_test.cc: TEST(ExecStackRefused, TrixieAndTheFixes)"},
};

// The actions no test applies, and why none can.
const std::map<v1::FixAction, std::string> kNotApplicable = {
    {v1::FIX_INSTALL, "installs a package from an index the tests cannot reach"},
    {v1::FIX_INSTALL_FOR_PYTHON, "installs a package from an index the tests cannot reach"},
    {v1::FIX_PIN_VERSION, "installs one version of a package from an index"},
    {v1::FIX_PIN_HOST, "installs a version of the host library from an index"},
    {v1::FIX_REPLACE_HOST, "installs another build of the host library from an index"},
    {v1::FIX_NEWER_DISTRIBUTION,
     "a distribution: the program on another system (glibc_test runs the same file "
     "under trixie's glibc, which is that, not the fix applied)"},
    {v1::FIX_EDIT_LD_SO_CONF, "rewrites /etc/ld.so.conf.d and the machine's ld.so.cache for every program"},
    {v1::FIX_CHECK_VERSION, "a comparison for a person to make (the kernel driver's version); nothing changes"},
    {v1::FIX_RUN_MATCHING_PROGRAM,
     "a program of the library's class or machine (32-bit x86, aarch64), which the "
     "x86-64 test host does not run natively"},
    {v1::FIX_NONE, "nothing to apply"},
};

TEST(ActionTable, EveryActionAppliedOrExcused) {
  std::set<v1::FixAction> table;
  for (const ApplyCase& c : ApplyCases()) table.insert(c.action);
  const google::protobuf::EnumDescriptor* d = v1::FixAction_descriptor();
  for (int i = 0; i < d->value_count(); ++i) {
    const auto action = static_cast<v1::FixAction>(d->value(i)->number());
    if (action == v1::FIX_ACTION_UNSPECIFIED) continue;
    const int where = static_cast<int>(table.count(action)) + static_cast<int>(kAppliedElsewhere.count(action)) +
                      static_cast<int>(kNotApplicable.count(action));
    EXPECT_EQ(where, 1) << d->value(i)->name()
                        << ": each action is applied by AppliedFixes, applied by one other test "
                           "(kAppliedElsewhere), or excused (kNotApplicable), in one place";
  }
  for (const auto& [action, test] : kAppliedElsewhere) {
    const size_t colon = test.find(": ");
    ASSERT_NE(colon, std::string::npos) << test;
    EXPECT_NE(testing::ReadFile(PROJECT_SOURCE "/" + test.substr(0, colon)).find(test.substr(colon + 2)),
              std::string::npos)
        << render::EnumWord(action) << ": " << test;
  }
}

// --try-fixes needs the report: with --no-report nothing runs.
TEST(TryFixesOptions, NoReportRefused) {
  const std::string dir = testing::ScratchDir("fixes_try_no_report");
  const testing::Proc p = RunCmd({LDSCOPE_BIN, "run", "--try-fixes", "--no-report", "-o", dir + "/t.ldscope", "--",
                                  "/usr/bin/touch", dir + "/ran"});
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_NE(p.err.find("--no-report excludes --try-fixes"), std::string::npos) << p.err;
  EXPECT_FALSE(fs::exists(dir + "/ran"));
  EXPECT_FALSE(fs::exists(dir + "/t.ldscope"));
}

}  // namespace
}  // namespace ldscope
