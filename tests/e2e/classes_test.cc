// The finding classes (fall-through to another installation, runtime families across
// SONAMEs, symbol interposition, failed dlopens explained, the CUDA driver library,
// siblings that disagree, why a symbol is missing), each on tiny fixture libraries with
// whole golden text and JSON reports; the fixes for a missing symbol's cause, applied;
// and real, healthy Debian stacks (numpy, scipy, scikit-learn, torch, a make/gcc build)
// giving no finding at all with every pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include <google/protobuf/util/json_util.h>

#include "support/ld_debug.h"
#include "support/report_json.h"
#include "support/test_support.h"
#include "ldscope_proto/report.pb.h"
#include "render/words.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kFx = FIXTURES;

struct Scenario {
  std::string name;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  int code = 0;           // the command's own exit status (ldscope run passes it on)
  bool ld_debug = false;  // also compare the trace with LD_DEBUG=files of the same run
  std::string cwd = "";   // the directory it is started in ("": the test's)
};

// RunCmd in dir ("": here).
testing::Proc RunIn(const std::string& dir, const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  const auto here = std::filesystem::current_path();
  if (!dir.empty()) std::filesystem::current_path(dir);
  const auto r = RunCmd(argv, env);
  std::filesystem::current_path(here);
  return r;
}

std::vector<Scenario> Scenarios() {
  const std::string cu13 = kFx + "/classes/cu13";
  const std::string toolkit = cu13 + "/cuda-13.0/targets/x86_64-linux/lib";
  const std::string omp = kFx + "/classes/omp", blas = kFx + "/classes/blas";
  const std::string hog = kFx + "/classes/interpose/global/libhog.so";
  const std::string plugin = kFx + "/classes/interpose/plugin/libplugin.so";
  const std::string cuda = kFx + "/classes/cuda", sib = kFx + "/classes/siblings";
  return {
      // libcublas.so.13 from the wheel, its libcublasLt.so.13 from the toolkit.
      {"fall_through_split",
       {DLPROBE, "open", cu13 + "/site-packages/torch/lib/libtorch_cuda.so"},
       {"LD_LIBRARY_PATH=" + toolkit}},
      // The same as torch 2.11 lays it out: more RPATH entries, libcublasLt.so.13 first.
      {"fall_through_split_rpath_list",
       {DLPROBE, "open", cu13 + "/site-packages/torch/lib/libtorch_cuda_multi.so"},
       {"LD_LIBRARY_PATH=" + toolkit}},
      // libcuda.so.1 (the driver) from outside the wheel beside the wheel's libcudart: fine.
      {"fall_through_driver_healthy",
       {DLPROBE, "open", cu13 + "/site-packages/torch/lib/libc10_cuda.so"},
       {"LD_LIBRARY_PATH=" + kFx + "/classes/driver"}},
      // The RUNPATH directory lacks libver.so.1; LD_LIBRARY_PATH's old copy lacks VER_2.
      {"fall_through_failure",
       {DLPROBE, "open", kFx + "/classes/fall/app/libfalluser.so"},
       {"LD_LIBRARY_PATH=" + kFx + "/ver/old"}},
      // Two copies of GNU libgomp (one renamed by auditwheel), two OpenBLAS builds.
      {"runtime_copies",
       {DLPROBE, "open", omp + "/lib/libgomp.so.1", "open", omp + "/wheel.libs/libgomp-e985bcbb.so.1.0.0", "open",
        blas + "/lib/libopenblas.so.0", "open", blas + "/numpy.libs/libscipy_openblas64_-ff651d7f.so"},
       {}},
      // GNU and LLVM OpenMP; OpenBLAS and MKL both exporting dgemm_; CUDA 12 and 13 cuBLAS.
      {"runtime_conflicts",
       {DLPROBE, "open", omp + "/lib/libgomp.so.1", "open", omp + "/llvm/libomp.so", "open",
        blas + "/lib/libopenblas.so.0", "open", blas + "/mkl/libmkl_rt.so.2", "open",
        kFx + "/classes/cu12/site-packages/nvidia/cublas/lib/libcublas.so.12", "open", toolkit + "/libcublas.so.13"},
       {}},
      // GNU libgomp for an extension, then LLVM libomp, which defines GNU's entry points
      // too: loaded first, it serves both.
      {"runtime_openmp_serves",
       {DLPROBE, "open", omp + "/app/libworker.so", "open", omp + "/llvm-compat/libomp.so"},
       {}},
      // libstdc++.so.6 first, then a wheel's renamed libstdc++ that libcxxuser.so needs.
      {"two_cxx_runtimes",
       {DLPROBE, "open", kFx + "/classes/cxx/system/libstdc++.so.6", "open", kFx + "/classes/cxx/app/libcxxuser.so"},
       {}},
      {"interposition_rtld_global", {"/usr/bin/python3", SCENARIOS_DIR "/interposition_rtld_global.py", kFx}, {}},
      {"interposition_setdlopenflags", {"/usr/bin/python3", SCENARIOS_DIR "/interposition_setdlopenflags.py", kFx}, {}},
      // One OpenBLAS, and MKL inside a bigger library: one BLAS as threadpoolctl counts them.
      {"blas_embedded_quiet",
       {DLPROBE, "open", blas + "/lib/libopenblas.so.0", "open", blas + "/app/libtorch_cpu_like.so"},
       {}},
      {"interposition_same_runtime", {"/usr/bin/python3", SCENARIOS_DIR "/interposition_same_runtime.py", kFx}, {}},
      {"interposition_preload", {DLPROBE, "open", plugin}, {"LD_PRELOAD=" + hog}},
      // A C program's dlopen mode is not in the trace: the finding says so.
      {"interposition_mode_unknown", {DLPROBE, "gopen", hog, "open", plugin}, {}},
      // Failed dlopens explained. NCCL-style: libnccl-net.so found through
      // LD_LIBRARY_PATH, its libfabric.so.1 (RUNPATH) too old for FABRIC_1.7.
      {"failed_dlopen_plugin_rejected",
       {DLPROBE, "open", "libnccl-net.so"},
       {"LD_LIBRARY_PATH=" + kFx + "/classes/plugin/nccl"}},
      // The same probe with no plugin installed: information only.
      {"failed_dlopen_plugin_absent", {DLPROBE, "open", "libnccl-net.so"}, {}},
      // Many optional probes (as cupy, cuDNN and jax make): one finding for the process.
      {"failed_dlopen_probes_folded",
       {DLPROBE, "open", "libnccl-net.so", "open", "libnccl-net.so", "open", "libcutensor.so.2"},
       {}},
      // The same probe in each of three commands of a script: one finding naming the
      // other two processes.
      {"failed_dlopen_probes_processes",
       {"/bin/sh", "-c",
        DLPROBE " open libnccl-net.so; " DLPROBE " open libnccl-net.so; " DLPROBE " open libnccl-net.so; true"},
       {}},
      // libframework.so's constructor dlopens libbackend.so, which only libapp.so's
      // RUNPATH holds.
      // A versioned symbol whose version's library became a stub (glibc 2.34's
      // libpthread.so.0): another object of the scope defines it, so the dlopen fails only
      // on its truly undefined symbol; the stub does not reject it.
      {"failed_dlopen_version_stub", {DLPROBE, "open", kFx + "/classes/stub/plugin/libstubuser.so"}, {}},
      {"failed_dlopen_runpath_not_inherited", {DLPROBE, "open", kFx + "/classes/runpath/app/libapp.so"}, {}},
      // provider_fn is in libprovider.so, loaded by an earlier dlopen of unknown mode.
      {"failed_dlopen_out_of_scope",
       {DLPROBE, "open", kFx + "/classes/scope/provider/libprovider.so", "open",
        kFx + "/classes/scope/consumer/libconsumer.so"},
       {}},
      // The same from Python's ctypes, whose mode (RTLD_LOCAL) the hook reads.
      {"failed_dlopen_out_of_scope_python",
       {"/usr/bin/python3", SCENARIOS_DIR "/failed_dlopen_local_scope.py", kFx},
       {}},
      // A ctypes load of a library installed nowhere, which the program goes on without
      // (information), and the same that ends it (exit status 1: an error): both fixes
      // name the Python line that made the call, not the interpreter's _ctypes module.
      {"failed_dlopen_python_optional", {"/usr/bin/python3", SCENARIOS_DIR "/ctypes_not_found.py"}, {}},
      {"failed_dlopen_python_fatal", {"/usr/bin/python3", SCENARIOS_DIR "/ctypes_not_found.py", "fatal"}, {}, 1},
      // The CUDA driver library. LDSCOPE_NVIDIA_VERSION_FILE stands in for
      // /proc/driver/nvidia/version (absent: no kernel driver loaded).
      // A toolkit's stub found through LD_LIBRARY_PATH, on a machine without a driver.
      {"cuda_stub",
       {DLPROBE, "open", "libcuda.so"},
       {"LD_LIBRARY_PATH=" + cuda + "/toolkit/lib64/stubs", "LDSCOPE_NVIDIA_VERSION_FILE=" + cuda + "/nvidia/absent"}},
      // cuda-compat 580.65.06 from LD_LIBRARY_PATH on kernel driver 535.104.05.
      {"cuda_compat_mismatch",
       {DLPROBE, "open", "libcuda.so.1"},
       {"LD_LIBRARY_PATH=" + cuda + "/compat", "LDSCOPE_NVIDIA_VERSION_FILE=" + cuda + "/nvidia/proc-version-535"}},
      // The same with the kernel driver of its version (the sysfs file's format): nothing.
      {"cuda_compat_matches",
       {DLPROBE, "open", "libcuda.so.1"},
       {"LD_LIBRARY_PATH=" + cuda + "/compat", "LDSCOPE_NVIDIA_VERSION_FILE=" + cuda + "/nvidia/sys-version-580"}},
      // The same with no kernel driver recorded: the match cannot be checked (info).
      {"cuda_compat_unknown",
       {DLPROBE, "open", "libcuda.so.1"},
       {"LD_LIBRARY_PATH=" + cuda + "/compat", "LDSCOPE_NVIDIA_VERSION_FILE=" + cuda + "/nvidia/absent"}},
      // A driver's libcuda.so.1 and the compat copy, both loaded by path.
      {"cuda_two_copies",
       {DLPROBE, "open", kFx + "/classes/driver/libcuda.so.1", "open", cuda + "/compat/libcuda.so.1"},
       {"LDSCOPE_NVIDIA_VERSION_FILE=" + cuda + "/nvidia/sys-version-580"}},
      // Siblings: three ranks of one program; rank 2 preloads an old NCCL.
      {"siblings_odd_rank",
       {"/bin/sh", "-c",
        "RANK=0 LOCAL_RANK=0 $0 open libnccl.so.2 & RANK=1 LOCAL_RANK=1 $0 open libnccl.so.2 & "
        "RANK=2 LOCAL_RANK=2 LD_PRELOAD=$1 $0 open libnccl.so.2 & wait",
        DLPROBE, sib + "/old/libnccl.so.2.18.1"},
       {"LD_LIBRARY_PATH=" + sib + "/nccl/lib"}},
      // Two ranks (as on a 2-GPU machine): no majority, rank 0's file is the reference.
      {"siblings_two_ranks",
       {"/bin/sh", "-c",
        "RANK=0 LOCAL_RANK=0 $0 open libnccl.so.2 & RANK=1 LOCAL_RANK=1 LD_PRELOAD=$1 $0 open libnccl.so.2 & wait",
        DLPROBE, sib + "/old/libnccl.so.2.18.1"},
       {"LD_LIBRARY_PATH=" + sib + "/nccl/lib"}},
      // Nothing to report: the ranks agree; the old NCCL is loaded by another program
      // (other arguments); rank 2 also preloads a library the others lack (it has no peer
      // to disagree with); the shell that started them loads neither.
      // Why a symbol is missing. The C++ library ABI: libabiext.so built with
      // _GLIBCXX_USE_CXX11_ABI=0 against a libhost.so built with =1.
      {"cxx_abi_mismatch", {DLPROBE, "open", kFx + "/classes/cxxabi/ext/libabiext.so"}, {}},
      // flash_attn 2.6.3 built against torch 2.4 (SetDevice(int)), torch 2.5.1 installed.
      {"host_version_skew",
       {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py", kFx + "/classes/skew/site-packages", "flash_attn_2_cuda"},
       {}},
      // An abi3 module built for CPython 3.12 imported by the machine's older Python.
      {"python_api_missing",
       {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py", kFx + "/classes/cpython/site-packages", "_ymq"},
       {}},
      // core_register_codec defined in libcore.so, but hidden, or local by a version script.
      {"not_exported_hidden", {DLPROBE, "open", kFx + "/classes/notexported/hidden/plugin/libcodec.so"}, {}},
      {"not_exported_version_script", {DLPROBE, "open", kFx + "/classes/notexported/script/plugin/libcodec.so"}, {}},
      {"siblings_healthy",
       {"/bin/sh", "-c",
        "RANK=0 $0 open libnccl.so.2 & RANK=1 $0 open libnccl.so.2 & RANK=2 LD_PRELOAD=$2 $0 open libnccl.so.2 & "
        "wait; $0 open $1",
        DLPROBE, sib + "/old/libnccl.so.2.18.1", kFx + "/lib/libfix_b.so"},
       {"LD_LIBRARY_PATH=" + sib + "/nccl/lib"}},
  };
}

// Searches explained by the files they reached (search_files.cc), and the peer suite's
// situations (libtree's tests), each also compared with LD_DEBUG=files.
std::vector<Scenario> SearchScenarios() {
  const std::string sf = kFx + "/classes/search";
  return {
      // `export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/opt/x` with it unset: ":/opt/x". The
      // working directory holds a stale libsf_util.so.1 without sf_util_v2.
      {"search_empty_element_cwd",
       {DLPROBE, "open", sf + "/app/libsf_app.so"},
       {"LD_LIBRARY_PATH=:" + sf + "/opt"},
       0,
       true,
       sf + "/work"},
      // The same hazard where nothing was found there: a warning still.
      {"search_empty_element_hazard",
       {DLPROBE, "open", kFx + "/lib/libfix_b.so"},
       {"LD_LIBRARY_PATH=" + kFx + "/lib:"},
       0,
       true,
       sf + "/app"},
      // An RPATH ending in ':' (libsf_rpath.so's): the current directory for its NEEDED.
      // Nothing was found there: information, the list being its vendor's.
      {"search_empty_rpath_element", {DLPROBE, "open", sf + "/app/libsf_rpath.so"}, {}, 0, true, sf + "/work"},
      // An RPATH starting with ':': the stale copy in the working directory is taken, a warning.
      {"search_empty_rpath_first", {DLPROBE, "open", sf + "/app/libsf_rpath_first.so"}, {}, 0, true, sf + "/work"},
      // Only a 32-bit copy on the path: "wrong ELF class: ELFCLASS32".
      {"search_wrong_class", {DLPROBE, "open", "libsf_x.so"}, {"LD_LIBRARY_PATH=" + sf + "/lib32"}, 0, true},
      // An aarch64 build opened by its path: "No such file or directory", though it exists.
      {"search_wrong_machine", {DLPROBE, "open", sf + "/arm64/libsf_x.so"}, {}, 0, true},
      // 32-bit and aarch64 copies before the x86-64 one: skipped, nothing to report.
      {"search_foreign_skipped_healthy",
       {DLPROBE, "open", "libsf_x.so"},
       {"LD_LIBRARY_PATH=" + sf + "/lib32:" + sf + "/arm64:" + sf + "/lib64"},
       0,
       true},
      // Three LD_PRELOAD entries ld.so ignores: not found, 32-bit, a GNU ld script.
      {"search_preload_ignored",
       {DLPROBE, "open", kFx + "/lib/libfix_b.so"},
       {"LD_PRELOAD=libsf_nothere.so.1 " + sf + "/lib32/libsf_x.so:" + sf + "/script/libsf_util.so"},
       0,
       true},
      // dlopen("libsf_util.so") finds the GNU ld script first: "invalid ELF header".
      {"search_linker_script",
       {DLPROBE, "open", "libsf_util.so"},
       {"LD_LIBRARY_PATH=" + sf + "/script:" + sf + "/opt"},
       0,
       true},
      // libtree's 08_nodeflib: exe_a (-z nodefaultlib) cannot find libc.so.6.
      {"peer_08_nodeflib", {sf + "/nodeflib/exe_a"}, {}, 127, true},
      // libtree's 07: $ORIGIN of b/libg.so (a symbolic link to a/libg.so) is b/.
      {"peer_07_origin_symlink", {sf + "/origin/exe"}, {}, 127, true},
  };
}

// What ld.so checks as it loads an object (load_checks.cc): the version nodes it needs.
std::vector<Scenario> LoadCheckScenarios() {
  const std::string lc = kFx + "/classes/loadcheck";
  return {
      // An extension module built for glibc 2.38, imported by a program that needs it.
      {"needs_newer_glibc",
       {"/usr/bin/python3", SCENARIOS_DIR "/import_required.py", lc + "/site-packages", "module_ref"},
       {},
       1},
      // libtree's 06_symbol_versions: exe_v2 needs libx.so's VER_2, its RUNPATH finds v1's
      // copy first, which lacks it; v2's copy later on the same RUNPATH has it.
      {"peer_06_symbol_versions", {lc + "/symver/exe_v2"}, {}, 1, true},
      // Two late libraries of 1,024 bytes of initial-exec TLS each: the second does not fit.
      {"static_tls_exhausted", {DLPROBE, "open", lc + "/initial-exec/libtls_a.so", "open", lc + "/initial-exec/libtls_b.so"}, {}},
      // 1,800 bytes: more than glibc 2.36 leaves dlprobe untraced, less than under ldscope.
      {"static_tls_hidden_by_tracing", {DLPROBE, "open", lc + "/initial-exec/libtls_big.so"}, {}},
  };
}

// gtest names a failing case by this, not by the struct's bytes.
void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

// racy_streams: processes started concurrently connect in any order.
std::string Streams(std::string s, bool racy_streams) {
  if (racy_streams) s = std::regex_replace(s, std::regex("\"stream\": [0-9]+"), "\"stream\": 0");
  return s;
}


class ClassGolden : public ::testing::TestWithParam<Scenario> {};

TEST_P(ClassGolden, TextAndJson) {
  const Scenario& sc = GetParam();
  const auto dir = testing::ScratchDir("classes_" + sc.name);
  const std::string trace = dir + "/t.ldscope";
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", trace, "--report", dir + "/report.txt", "--"};
  cmd.insert(cmd.end(), sc.argv.begin(), sc.argv.end());
  std::vector<std::string> env = sc.env;
  if (sc.ld_debug) env.insert(env.end(), {"LD_DEBUG=files", "LD_DEBUG_OUTPUT=" + dir + "/dbg"});
  const auto r = RunIn(sc.cwd, cmd, env);
  ASSERT_EQ(r.code, sc.code) << r.err;
  // With --report the diagnosis goes to the file: stderr is the command's own (ld.so's
  // message when it cannot start or ignores a preload).
  const std::string text = "== the command printed\n" + r.out + "\n" +
                           (r.err.empty() ? "" : "== on stderr\n" + r.err + "\n") + "== ldscope's diagnosis\n" +
                           testing::ReadFile(dir + "/report.txt");
  testing::ExpectGolden("classes_" + sc.name + ".txt", text);
  const auto j = RunCmd({LDSCOPE_BIN, "report", "--format", "json", trace}, sc.env);
  ASSERT_EQ(j.code, 0) << j.err;
  testing::ExpectGolden("classes_" + sc.name + ".json", Streams(j.out, sc.argv.front() == "/bin/sh"));
  if (sc.ld_debug) testing::ExpectTimelineSameAsGlibc(testing::TimelineOf({trace}), dir);
}

INSTANTIATE_TEST_SUITE_P(Classes, ClassGolden, ::testing::ValuesIn(Scenarios()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Search, ClassGolden, ::testing::ValuesIn(SearchScenarios()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(LoadCheck, ClassGolden, ::testing::ValuesIn(LoadCheckScenarios()),
                         [](const auto& info) { return info.param.name; });

// ---- The fixes of the search scenarios, applied as the report words them ----

// A command traced, and its report as the schema's message.
struct Traced {
  testing::Proc run;
  v1::Report report;
};

Traced TraceAndReport(const std::string& name, const std::vector<std::string>& argv,
                      const std::vector<std::string>& env, const std::string& cwd = "") {
  const auto dir = testing::ScratchDir("search_fix_" + name);
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/t.ldscope", "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  Traced t;
  t.run = RunIn(cwd, cmd, env);
  const auto j = RunCmd({LDSCOPE_BIN, "report", "--format", "json", dir + "/t.ldscope"});
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_TRUE(testing::ParseJson(j.out, &t.report)) << j.out;
  return t;
}

size_t Count(const v1::Report& r, v1::FindingKind kind) {
  return std::count_if(r.findings().begin(), r.findings().end(), [&](const auto& f) { return f.kind() == kind; });
}

// The text of the first fix of that action in a finding of that kind ("" when none).
std::string FixOf(const v1::Report& r, v1::FindingKind kind, v1::FixAction action) {
  for (const auto& f : r.findings())
    if (f.kind() == kind)
      for (const auto& x : f.fixes())
        if (x.action() == action) return x.text();
  return "";
}

// The first match of re's group 1 in text, which must be there.
std::string Grab(const std::string& text, const std::string& re) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex(re))) << re << " in: " << text;
  return m.size() > 1 ? m[1].str() : "";
}

// Before: the finding, and the failure. After the fix the report words: neither.
void ExpectFixed(const Traced& before, const Traced& after, v1::FindingKind kind, int before_code = 0) {
  EXPECT_EQ(before.run.code, before_code) << before.run.err;
  EXPECT_GE(Count(before.report, kind), 1u);
  EXPECT_EQ(after.run.code, 0) << after.run.err;
  EXPECT_EQ(Count(after.report, kind), 0u);
  for (const auto& f : after.report.findings()) EXPECT_NE(f.severity(), v1::ERROR) << f.message();
  EXPECT_EQ(after.run.out.find("failed"), std::string::npos) << after.run.out;
}

const std::string kSf = kFx + "/classes/search";

TEST(SearchFixes, EmptyElementDropped) {
  const std::vector<std::string> argv = {DLPROBE, "open", kSf + "/app/libsf_app.so"};
  const Traced before = TraceAndReport("empty_before", argv, {"LD_LIBRARY_PATH=:" + kSf + "/opt"}, kSf + "/work");
  EXPECT_NE(before.run.out.find("failed"), std::string::npos) << before.run.out;
  const std::string llp =
      Grab(FixOf(before.report, v1::EMPTY_PATH_ELEMENT, v1::FIX_SET_VARIABLE), "(LD_LIBRARY_PATH=\\S+)");
  // The missing-symbol finding about the stale copy words the same fix.
  EXPECT_NE(FixOf(before.report, v1::MISSING_SYMBOL, v1::FIX_DROP_FROM_LD_LIBRARY_PATH).find(llp), std::string::npos);
  const Traced after = TraceAndReport("empty_after", argv, {llp}, kSf + "/work");
  ExpectFixed(before, after, v1::EMPTY_PATH_ELEMENT);
}

TEST(SearchFixes, SixtyFourBitCopyFirst) {
  const Traced before =
      TraceAndReport("class_before", {DLPROBE, "open", "libsf_x.so"}, {"LD_LIBRARY_PATH=" + kSf + "/lib32"});
  // "install a 64-bit x86-64 build ... on the search path before it": the fixture's.
  EXPECT_NE(FixOf(before.report, v1::INCOMPATIBLE_LIBRARY, v1::FIX_INSTALL).find("on the search path before it"),
            std::string::npos);
  const Traced after = TraceAndReport("class_after", {DLPROBE, "open", "libsf_x.so"},
                                      {"LD_LIBRARY_PATH=" + kSf + "/lib64:" + kSf + "/lib32"});
  ExpectFixed(before, after, v1::INCOMPATIBLE_LIBRARY);
}

TEST(SearchFixes, PreloadByPath) {
  const Traced before =
      TraceAndReport("preload_before", {DLPROBE, "open", kFx + "/lib/libfix_b.so"}, {"LD_PRELOAD=libsf_x.so"});
  EXPECT_NE(before.run.err.find("cannot be preloaded"), std::string::npos) << before.run.err;
  EXPECT_NE(FixOf(before.report, v1::PRELOAD_IGNORED, v1::FIX_PRELOAD_BY_PATH).find("full path"), std::string::npos);
  const Traced after = TraceAndReport("preload_after", {DLPROBE, "open", kFx + "/lib/libfix_b.so"},
                                      {"LD_PRELOAD=" + kSf + "/lib64/libsf_x.so"});
  ExpectFixed(before, after, v1::PRELOAD_IGNORED);
  EXPECT_EQ(after.run.err.find("cannot be preloaded"), std::string::npos) << after.run.err;
}

// "or remove ENTRY from LD_PRELOAD", applied verbatim: the entry taken out of the
// variable, the other preload kept.
TEST(SearchFixes, DropFromLdPreload) {
  const std::vector<std::string> argv = {DLPROBE, "open", kFx + "/lib/libfix_b.so"};
  const std::string other = kFx + "/lib/libfix_a.so";
  const Traced before = TraceAndReport("drop_preload_before", argv, {"LD_PRELOAD=libsf_x.so:" + other});
  EXPECT_NE(before.run.err.find("cannot be preloaded"), std::string::npos) << before.run.err;
  const std::string entry =
      Grab(FixOf(before.report, v1::PRELOAD_IGNORED, v1::FIX_DROP_FROM_LD_PRELOAD), "remove (\\S+) from LD_PRELOAD");
  std::string kept;
  for (const std::string& e : {std::string("libsf_x.so"), other})
    if (e != entry) kept += (kept.empty() ? "" : ":") + e;
  EXPECT_EQ(kept, other);
  const Traced after = TraceAndReport("drop_preload_after", argv, {"LD_PRELOAD=" + kept});
  ExpectFixed(before, after, v1::PRELOAD_IGNORED);
  EXPECT_EQ(after.run.err.find("cannot be preloaded"), std::string::npos) << after.run.err;
}

TEST(SearchFixes, LoadTheLibraryTheScriptNames) {
  const std::vector<std::string> env = {"LD_LIBRARY_PATH=" + kSf + "/script:" + kSf + "/opt"};
  const Traced before = TraceAndReport("script_before", {DLPROBE, "open", "libsf_util.so"}, env);
  const std::string name = Grab(FixOf(before.report, v1::NOT_A_LIBRARY, v1::FIX_LOAD_BY_PATH), "^dlopen (\\S+) ");
  EXPECT_EQ(name, "libsf_util.so.1");
  const Traced after = TraceAndReport("script_after", {DLPROBE, "open", name}, env);
  ExpectFixed(before, after, v1::NOT_A_LIBRARY);
}

TEST(SearchFixes, NodeflibLibraryPath) {
  const Traced before = TraceAndReport("nodeflib_before", {kSf + "/nodeflib/exe_a"}, {});
  const std::string llp =
      Grab(FixOf(before.report, v1::MISSING_LIBRARY, v1::FIX_SET_VARIABLE), "(LD_LIBRARY_PATH=\\S+)");
  const Traced after = TraceAndReport("nodeflib_after", {kSf + "/nodeflib/exe_a"}, {llp});
  ExpectFixed(before, after, v1::MISSING_LIBRARY, 127);
}

TEST(SearchFixes, OriginBesideTheLink) {
  // The tree copied (the link kept a link), so that the fix can change it.
  const auto dir = testing::ScratchDir("search_fix_origin_tree");
  std::filesystem::copy(kSf + "/origin", dir + "/origin",
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
  const Traced before = TraceAndReport("origin_before", {dir + "/origin/exe"}, {});
  const std::string llp =
      Grab(FixOf(before.report, v1::MISSING_LIBRARY, v1::FIX_SET_VARIABLE), "(LD_LIBRARY_PATH=\\S+)");
  ExpectFixed(before, TraceAndReport("origin_after_env", {dir + "/origin/exe"}, {llp}), v1::MISSING_LIBRARY, 127);
  const std::string ln = Grab(FixOf(before.report, v1::MISSING_LIBRARY, v1::FIX_ADD_SYMLINK), "(ln -s \\S+ \\S+)");
  ASSERT_EQ(RunCmd({"/bin/sh", "-c", ln}).code, 0) << ln;
  ExpectFixed(before, TraceAndReport("origin_after_link", {dir + "/origin/exe"}, {}), v1::MISSING_LIBRARY, 127);
}

// ---- What ld.so checks as it loads an object: the fixes, applied ----

const std::string kLc = kFx + "/classes/loadcheck";

void Build(const std::vector<std::string>& argv);  // below: runs a compiler, which must succeed

// libtree's 06_symbol_versions: each fix the finding words (a RUNPATH rewritten with
// patchelf on a copy, LD_LIBRARY_PATH, a preload) starts exe_v2.
TEST(LoadCheckFixes, SymbolVersionsCopyFirst) {
  const auto dir = testing::ScratchDir("loadcheck_fix_symver");
  std::filesystem::copy_file(kLc + "/symver/exe_v2", dir + "/exe_v2");
  const Traced before = TraceAndReport("symver_before", {dir + "/exe_v2"}, {});
  ASSERT_EQ(before.run.code, 1) << before.run.err;
  EXPECT_NE(before.run.err.find("version `VER_2' not found"), std::string::npos) << before.run.err;
  ASSERT_EQ(Count(before.report, v1::MISSING_SYMBOL), 1u);
  EXPECT_EQ(before.report.findings(0).severity(), v1::ERROR);
  for (const v1::FixAction action : {v1::FIX_SET_VARIABLE, v1::FIX_PRELOAD_BY_PATH}) {
    const std::string var =
        Grab(FixOf(before.report, v1::MISSING_SYMBOL, action), "((LD_LIBRARY_PATH|LD_PRELOAD)=\\S+)");
    ExpectFixed(before, TraceAndReport("symver_after_" + render::EnumWord(action), {dir + "/exe_v2"}, {var}),
                v1::MISSING_SYMBOL, 1);
  }
  const std::string patch = Grab(FixOf(before.report, v1::MISSING_SYMBOL, v1::FIX_SET_RUNPATH), "(patchelf .*)$");
  const auto p = RunCmd({"/bin/sh", "-c", patch});
  ASSERT_EQ(p.code, 0) << patch << ": " << p.err;
  ExpectFixed(before, TraceAndReport("symver_after_runpath", {dir + "/exe_v2"}, {}), v1::MISSING_SYMBOL, 1);
}

// module_ref.so built for glibc 2.38: "build it from source on this system", done with this
// machine's headers and C library, imports.
TEST(LoadCheckFixes, NewerGlibcBuildHere) {
  const auto dir = testing::ScratchDir("loadcheck_fix_glibc");
  const std::vector<std::string> argv = {"/usr/bin/python3", SCENARIOS_DIR "/import_required.py"};
  auto with = [&](const std::string& site) {
    std::vector<std::string> a = argv;
    a.insert(a.end(), {site, "module_ref"});
    return a;
  };
  const Traced before = TraceAndReport("glibc_before", with(kLc + "/site-packages"), {});
  ASSERT_EQ(Count(before.report, v1::NEEDS_NEWER_GLIBC), 1u);
  EXPECT_NE(FixOf(before.report, v1::NEEDS_NEWER_GLIBC, v1::FIX_OLDER_GLIBC_BUILD)
                .find("build it from source on this system"),
            std::string::npos);
  const auto inc = RunCmd({"/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"});
  std::filesystem::create_directories(dir + "/site");
  ASSERT_NO_FATAL_FAILURE(Build({CC_BIN, "-shared", "-fPIC", "-I" + inc.out.substr(0, inc.out.size() - 1), "-o",
                                 dir + "/site/module_ref.so", FIXTURE_SRC "/newer_glibc.c"}));
  const Traced after = TraceAndReport("glibc_after", with(dir + "/site"), {});
  ExpectFixed(before, after, v1::NEEDS_NEWER_GLIBC, 1);
  EXPECT_EQ(after.run.out, "import module_ref: ok\n");
}

// Static TLS: each fix (a preload, a larger optional_static_tls) applied to the program as
// it runs without ldscope, where it must load everything, and traced, where the report
// must not claim the failure any more.
struct TlsCase {
  std::vector<std::string> argv;
  std::string failing;  // the library that does not fit untraced
};

TlsCase TlsTwoLate() {
  return {{DLPROBE, "open", kLc + "/initial-exec/libtls_a.so", "open", kLc + "/initial-exec/libtls_b.so"}, kLc + "/initial-exec/libtls_b.so"};
}
TlsCase TlsHidden() { return {{DLPROBE, "open", kLc + "/initial-exec/libtls_big.so"}, kLc + "/initial-exec/libtls_big.so"}; }

const char kNoRoom[] = "cannot allocate memory in static TLS block";

// The program without ldscope, with env: every dlopen succeeds (true) or one fails.
bool LoadsUntraced(const TlsCase& c, const std::vector<std::string>& env) {
  const auto r = RunCmd(c.argv, env);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out.find("failed") == std::string::npos;
}

size_t CountAtLeast(const v1::Report& r, v1::FindingKind kind, v1::Severity sev) {
  return std::count_if(r.findings().begin(), r.findings().end(),
                       [&](const auto& f) { return f.kind() == kind && f.severity() >= sev; });
}

TEST(LoadCheckFixes, StaticTlsTunable) {
  for (const TlsCase& c : {TlsTwoLate(), TlsHidden()}) {
    const std::string name = std::filesystem::path(c.failing).filename().string();
    const Traced before = TraceAndReport("tls_tunable_before_" + name, c.argv, {});
    EXPECT_FALSE(LoadsUntraced(c, {}));
    ASSERT_EQ(CountAtLeast(before.report, v1::STATIC_TLS_EXHAUSTED, v1::WARNING), 1u);
    const std::string var =
        Grab(FixOf(before.report, v1::STATIC_TLS_EXHAUSTED, v1::FIX_SET_TUNABLE), "(GLIBC_TUNABLES=\\S+)");
    EXPECT_TRUE(LoadsUntraced(c, {var})) << var;
    // Traced with it: the report reads the tunable from the trace and finds nothing.
    const Traced after = TraceAndReport("tls_tunable_after_" + name, c.argv, {var});
    EXPECT_EQ(after.run.out.find("failed"), std::string::npos) << after.run.out;
    EXPECT_EQ(Count(after.report, v1::STATIC_TLS_EXHAUSTED), 0u) << var;
  }
}

TEST(LoadCheckFixes, StaticTlsPreload) {
  for (const TlsCase& c : {TlsTwoLate(), TlsHidden()}) {
    const std::string name = std::filesystem::path(c.failing).filename().string();
    const Traced before = TraceAndReport("tls_preload_before_" + name, c.argv, {});
    const std::string var =
        Grab(FixOf(before.report, v1::STATIC_TLS_EXHAUSTED, v1::FIX_PRELOAD_BY_PATH), "(LD_PRELOAD=\\S+)");
    EXPECT_EQ(var, "LD_PRELOAD=" + c.failing);
    EXPECT_TRUE(LoadsUntraced(c, {var})) << var;
    const Traced after = TraceAndReport("tls_preload_after_" + name, c.argv, {var});
    EXPECT_EQ(CountAtLeast(after.report, v1::STATIC_TLS_EXHAUSTED, v1::WARNING), 0u);
    // Under ldscope's audit module glibc places the preloaded library's TLS in the
    // surplus too: where the late one then does not fit, the report says that only
    // tracing made it fail.
    if (after.run.out.find(kNoRoom) != std::string::npos) {
      ASSERT_EQ(Count(after.report, v1::STATIC_TLS_EXHAUSTED), 1u) << after.run.out;
      EXPECT_NE(after.report.findings(0).headline().find("only because it was traced"), std::string::npos);
    }
  }
}

// A library on a noexec mount: a tmpfs mounted noexec in a mount namespace of the test's
// own (unshare -m: the tests run as root), with ldscope inside it, so that the collector
// sees the mount the program sees. Then the fix it words (a remount), applied.
TEST(SearchFixes, NoexecMount) {
  const auto dir = testing::ScratchDir("search_noexec");
  const std::string mnt = dir + "/nx", trace = dir + "/t.ldscope", fixed = dir + "/fixed.ldscope";
  const std::string script =
      "mount -t tmpfs -o noexec,nosuid,nodev tmpfs \"$1\" && cp \"$2\" \"$1\"/libfix_b.so && "
      "LD_DEBUG=files LD_DEBUG_OUTPUT=\"$7\"/dbg \"$3\" run -q --no-report -o \"$4\" -- \"$5\" open "
      "\"$1\"/libfix_b.so && \"$3\" report \"$4\" > \"$4.txt\" && \"$3\" report --format json \"$4\" > \"$4.json\" && "
      "sh -c \"$(sed -n 's/^  fix: or remount [^:]*: //p' \"$4.txt\")\" && "
      "\"$3\" run -q --no-report -o \"$6\" -- \"$5\" open \"$1\"/libfix_b.so && \"$3\" report \"$6\" > \"$6.txt\"";
  std::filesystem::create_directories(mnt);
  const auto r = RunCmd({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script, "sh", mnt, kFx + "/lib/libfix_b.so",
                         LDSCOPE_BIN, trace, DLPROBE, fixed, dir});
  ASSERT_EQ(r.code, 0) << "unshare -m and a tmpfs mount need root: " << r.err;
  EXPECT_NE(r.out.find("open " + mnt + "/libfix_b.so: failed: " + mnt +
                       "/libfix_b.so: failed to map segment from shared object"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("open " + mnt + "/libfix_b.so: ok"), std::string::npos) << r.out;
  testing::ExpectGolden("classes_search_noexec.txt", testing::ReadFile(trace + ".txt"));
  testing::ExpectGolden("classes_search_noexec.json", testing::ReadFile(trace + ".json"));
  EXPECT_EQ(testing::ReadFile(fixed + ".txt"), "no findings\n");
  testing::ExpectTimelineSameAsGlibc(testing::TimelineOf({trace}), dir);
}

// ---- The fixes for a missing symbol's cause, applied as their text says ----
// Each test reads the fix from the finding, does what it says to the fixture (a rebuild,
// in a scratch directory), runs the program again: it loads, and nothing is reported.

struct Reported {
  std::string out;    // what the command printed
  std::string text;   // the text report
  v1::Report report;  // the JSON report, parsed
};

Reported Trace(const std::string& dir, const std::vector<std::string>& argv) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> cmd = {LDSCOPE_BIN,         "run", "-q", "-o", dir + "/t.ldscope", "--report",
                                  dir + "/report.txt", "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  const auto r = RunCmd(cmd);
  EXPECT_EQ(r.code, 0) << r.err;
  Reported t{r.out, testing::ReadFile(dir + "/report.txt"), {}};
  const auto j = RunCmd({LDSCOPE_BIN, "report", "--format", "json", dir + "/t.ldscope"});
  EXPECT_TRUE(testing::ParseJson(j.out, &t.report)) << j.out;
  return t;
}

// The text of the first finding's fix with that action ("" when none), after checking
// that the first finding is a missing symbol of that cause.
std::string FixText(const Reported& t, v1::MissingCause cause, v1::FixAction action) {
  if (t.report.findings_size() == 0) {
    ADD_FAILURE() << "no finding:\n" << t.text;
    return "";
  }
  const v1::Finding& f = t.report.findings(0);
  EXPECT_EQ(f.kind(), v1::MISSING_SYMBOL) << t.text;
  EXPECT_TRUE(f.missing_size() > 0 && f.missing(0).cause() == cause) << t.text;
  for (const auto& x : f.fixes())
    if (x.action() == action) return x.text();
  ADD_FAILURE() << "no fix " << render::EnumWord(action) << ":\n" << t.text;
  return "";
}

void Build(const std::vector<std::string>& argv) {
  const auto r = RunCmd(argv);
  ASSERT_EQ(r.code, 0) << r.err;
}

void ExpectLoadsCleanly(const Reported& t) {
  EXPECT_EQ(t.text, "no findings\n");
  EXPECT_TRUE(t.out.find(": ok") != std::string::npos) << t.out;
}

// "rebuild libabiext.so with -D_GLIBCXX_USE_CXX11_ABI=1, ...": with that flag it loads.
TEST(ClassFixes, CxxAbiRebuildWithTheHostsAbi) {
  const auto dir = testing::ScratchDir("fix_cxx_abi");
  const std::string host = kFx + "/classes/cxxabi/host";
  const Reported before = Trace(dir + "/before", {DLPROBE, "open", kFx + "/classes/cxxabi/ext/libabiext.so"});
  std::smatch flag;
  const std::string fix = FixText(before, v1::CAUSE_CXX_ABI, v1::FIX_REBUILD_CXX_ABI);
  ASSERT_TRUE(std::regex_search(fix, flag, std::regex("-D_GLIBCXX_USE_CXX11_ABI=[01]"))) << fix;
  ASSERT_NO_FATAL_FAILURE(Build({CXX_BIN, "-shared", "-fPIC", flag.str(), "-o", dir + "/libabiext.so",
                                 FIXTURE_SRC "/cxxabi_ext.cc", host + "/libhost.so", "-Wl,-rpath," + host}));
  ExpectLoadsCleanly(Trace(dir + "/after", {DLPROBE, "open", dir + "/libabiext.so"}));
}

// "rebuild flash_attn_2_cuda.abi3.so against the torch that is loaded (torch 2.5.1)": the
// fixture's torch 2.5.1 is its header's C10_VERSION 2.
TEST(ClassFixes, HostVersionRebuildAgainstTheLoadedHost) {
  const auto dir = testing::ScratchDir("fix_host_version");
  const std::string site = kFx + "/classes/skew/site-packages";
  const Reported before =
      Trace(dir + "/before", {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py", site, "flash_attn_2_cuda"});
  const std::string fix = FixText(before, v1::CAUSE_HOST_VERSION, v1::FIX_REBUILD_AGAINST_HOST);
  ASSERT_TRUE(fix.find("against the torch that is loaded (torch 2.5.1)") != std::string::npos) << fix;
  const auto inc = RunCmd({"/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"});
  std::filesystem::create_directories(dir + "/site");
  ASSERT_NO_FATAL_FAILURE(
      Build({CXX_BIN, "-shared", "-fPIC", "-DC10_VERSION=2", "-DPy_LIMITED_API=0x03080000",
             "-I" + inc.out.substr(0, inc.out.size() - 1), "-o", dir + "/site/flash_attn_2_cuda.abi3.so",
             FIXTURE_SRC "/skew_ext.cc", site + "/torch/lib/libc10_cuda.so", "-Wl,-rpath," + site + "/torch/lib"}));
  ExpectLoadsCleanly(
      Trace(dir + "/after", {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py", dir + "/site", "flash_attn_2_cuda"}));
}

// "or rebuild _ymq.abi3.so with this interpreter's headers: PYTHON -c '...' prints their
// directory": run that, build with those headers.
TEST(ClassFixes, PythonApiRebuildWithThisInterpretersHeaders) {
  const auto dir = testing::ScratchDir("fix_python_api");
  const std::string site = kFx + "/classes/cpython/site-packages";
  const Reported before = Trace(dir + "/before", {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py", site, "_ymq"});
  const std::string fix = FixText(before, v1::CAUSE_PYTHON_API, v1::FIX_REBUILD_FOR_PYTHON);
  std::smatch how;
  ASSERT_TRUE(std::regex_search(fix, how, std::regex(": (\\S+) -c '([^']*)' prints their directory"))) << fix;
  const auto inc = RunCmd({how[1].str(), "-c", how[2].str()});
  ASSERT_EQ(inc.code, 0) << inc.err;
  std::filesystem::create_directories(dir + "/site");
  ASSERT_NO_FATAL_FAILURE(Build({CC_BIN, "-shared", "-fPIC", "-I" + inc.out.substr(0, inc.out.size() - 1), "-o",
                                 dir + "/site/_ymq.abi3.so", FIXTURE_SRC "/ymq.c"}));
  ExpectLoadsCleanly(
      Trace(dir + "/after", {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py", dir + "/site", "_ymq"}));
}

// "export core_register_codec from libcore.so: declare it
// __attribute__((visibility("default"))) ..." for the hidden build, "...: list it under
// global: in its version script (version CORE_1.0) ..." for the scripted one: done to
// libcore.so, with the plugin beside it as the fixture lays them out.
void ExportAndLoad(const std::string& how) {
  const auto dir = testing::ScratchDir("fix_not_exported_" + how);
  const std::string plugin = kFx + "/classes/notexported/" + how + "/plugin/libcodec.so";
  const Reported before = Trace(dir + "/before", {DLPROBE, "open", plugin});
  const std::string fix = FixText(before, v1::CAUSE_NOT_EXPORTED, v1::FIX_EXPORT_SYMBOL);
  std::vector<std::string> cc = {
      CC_BIN, "-shared", "-fPIC", "-o", dir + "/lib/libcore.so", FIXTURE_SRC "/core.c", "-Wl,-soname,libcore.so"};
  if (how == "hidden") {
    const std::string attribute = "__attribute__((visibility(\"default\")))";
    ASSERT_TRUE(fix.find("export core_register_codec from libcore.so: declare it " + attribute) != std::string::npos)
        << fix;
    cc.insert(cc.end(), {"-fvisibility=hidden", "-DCORE_API=" + attribute});
  } else {
    ASSERT_TRUE(fix.find("export core_register_codec from libcore.so: list it under global: in its version script "
                         "(version CORE_1.0)") != std::string::npos)
        << fix;
    testing::WriteFile(dir + "/core.map", "CORE_1.0 {\n  global: core_init; core_register_codec;\n  local: *;\n};\n");
    cc.push_back("-Wl,--version-script=" + dir + "/core.map");
  }
  std::filesystem::create_directories(dir + "/lib");
  std::filesystem::create_directories(dir + "/plugin");
  ASSERT_NO_FATAL_FAILURE(Build(cc));
  std::filesystem::copy_file(plugin, dir + "/plugin/libcodec.so");
  ExpectLoadsCleanly(Trace(dir + "/after", {DLPROBE, "open", dir + "/plugin/libcodec.so"}));
}

TEST(ClassFixes, NotExportedHiddenExport) { ExportAndLoad("hidden"); }
TEST(ClassFixes, NotExportedVersionScriptExport) { ExportAndLoad("script"); }

// Real stacks from Debian's packages (scripts/setup installs them): every pass runs, and
// the report is empty. min_loads keeps the test honest about what it traced.
struct Healthy {
  std::string name;
  std::vector<std::string> argv;
  size_t min_loads;
};

std::vector<Healthy> HealthyStacks() {
  auto py = [](const std::string& code) { return std::vector<std::string>{"/usr/bin/python3", "-c", code}; };
  return {
      {"numpy", py("import numpy, numpy.linalg, numpy.fft, numpy.random; numpy.linalg.inv(numpy.eye(3))"), 20},
      {"scipy", py("import scipy.linalg, scipy.sparse.linalg, scipy.optimize, scipy.special, scipy.fft; "
                   "scipy.linalg.inv([[1.0, 2.0], [3.0, 4.0]])"), 40},
      {"sklearn", py("import sklearn.ensemble, sklearn.linear_model, sklearn.cluster"), 60},
      {"torch", py("import torch; torch.ones(3) @ torch.ones(3)"), 150},
      {"torch_numpy_scipy_sklearn", py("import torch, numpy, scipy.linalg, sklearn.ensemble"), 150},
      {"make_gcc", {"make", "-B", "-s", "CC=gcc"}, 10},
      // bash defines its own getenv and malloc, which its libtinfo's calls bind to: by design.
      {"bash", {"/bin/bash", "-c", "/bin/true"}, 4},
  };
}

// ---- A failed ctypes load the program did not survive ----

// An uncaught OSError ends the program: the failure is an error, and its fix names the
// line of the call.
TEST(FailedDlopenEnds, UncaughtOSError) {
  const auto dir = testing::ScratchDir("dlopen_uncaught");
  testing::WriteFile(dir + "/train.py", "import ctypes\n\nctypes.CDLL('libnot-there.so.7')\n");
  const Traced t = TraceAndReport("dlopen_uncaught", {"/usr/bin/python3", "train.py"}, {}, dir);
  EXPECT_EQ(t.run.code, 1) << t.run.err;
  EXPECT_NE(t.run.err.find("OSError"), std::string::npos) << t.run.err;
  ASSERT_EQ(Count(t.report, v1::DLOPEN_NOT_FOUND), 1u);
  for (const auto& f : t.report.findings()) {
    if (f.kind() != v1::DLOPEN_NOT_FOUND) continue;
    EXPECT_EQ(f.severity(), v1::ERROR) << f.message();
    EXPECT_EQ(f.message().find("nothing needs doing"), std::string::npos) << f.message();
    EXPECT_EQ(f.message().find("patchelf"), std::string::npos) << f.message();
  }
  EXPECT_NE(FixOf(t.report, v1::DLOPEN_NOT_FOUND, v1::FIX_DLOPEN_BY_PATH).find("at train.py:3"), std::string::npos)
      << t.report.findings(0).message();
}

// ---- Two OpenMP runtimes: the preload the report words, applied ----

const std::string kOmp = kFx + "/classes/omp";

// The runtime that defines every entry point the other's callers use, preloaded as the
// fix says: the finding is gone, and the program still works.
TEST(RuntimeFixes, OpenMPPreloadServesBoth) {
  const std::vector<std::string> argv = {DLPROBE, "open", kOmp + "/app/libworker.so", "open",
                                         kOmp + "/llvm-compat/libomp.so"};
  const Traced before = TraceAndReport("omp_serves_before", argv, {});
  const std::string preload =
      Grab(FixOf(before.report, v1::RUNTIME_FAMILY, v1::FIX_PRELOAD_BY_PATH), "(LD_PRELOAD=\\S+)");
  EXPECT_EQ(preload, "LD_PRELOAD=" + kOmp + "/llvm-compat/libomp.so");
  const Traced after = TraceAndReport("omp_serves_after", argv, {preload});
  ExpectFixed(before, after, v1::RUNTIME_FAMILY);
}

// Neither runtime defines the other's entry points: no preload is offered, and one
// applied anyway (the preloaded runtime comes first) changes the finding rather than
// offering the same preload again; the fix names the load to stop.
TEST(RuntimeFixes, OpenMPPreloadCannotServe) {
  const std::vector<std::string> argv = {DLPROBE, "open", kOmp + "/lib/libgomp.so.1", "open", kOmp + "/llvm/libomp.so"};
  const Traced before = TraceAndReport("omp_neither_before", argv, {});
  const Traced after = TraceAndReport("omp_neither_after", argv, {"LD_PRELOAD=" + kOmp + "/lib/libgomp.so.1"});
  for (const Traced* t : {&before, &after}) {
    ASSERT_EQ(Count(t->report, v1::RUNTIME_FAMILY), 1u);
    for (const auto& f : t->report.findings())
      for (const auto& x : f.fixes()) EXPECT_EQ(x.text().find("LD_PRELOAD="), std::string::npos) << x.text();
    EXPECT_NE(FixOf(t->report, v1::RUNTIME_FAMILY, v1::FIX_PIN_VERSION)
                  .find("stop loading " + kOmp + "/llvm/libomp.so (by a dlopen from"),
              std::string::npos)
        << t->report.findings(0).message();
  }
  const auto& details = after.report.findings(0).details();
  EXPECT_TRUE(std::any_of(details.begin(), details.end(), [](const auto& d) {
    return d.label() == "preloaded" && d.text().find("lacks __kmpc_fork_call") != std::string::npos;
  })) << after.report.findings(0).message();
}

// ---- Who installed each file a finding names ----

// The first line of a command's output ("" when it fails).
std::string FirstLine(const std::vector<std::string>& argv) {
  const auto r = RunCmd(argv);
  return r.code == 0 ? r.out.substr(0, r.out.find('\n')) : "";
}

// One SONAME in three copies, from a pip distribution's RECORD, a conda package's
// conda-meta JSON, and no package; the machine's libgomp.so.1 (Debian's libgomp1) beside
// a copy no package owns; a conda library whose NEEDED is nowhere. Each finding names
// every file's owner and the command that installs that package's version. The owners
// are those recorded when the trace was taken: with the package records gone, the
// report says the same. The Debian package's version and architecture are the
// machine's, written as ${DPKG_VERSION} and ${DPKG_ARCH}.
TEST(Owners, RecordedWhenTraced) {
  // By its /lib path: dpkg lists it under /usr/lib.
  const std::string gomp = "/lib/" + FirstLine({CC_BIN, "-print-multiarch"}) + "/libgomp.so.1";
  const std::string version = FirstLine({"/usr/bin/dpkg-query", "-W", "-f=${Version}\n", "libgomp1"});
  const std::string arch = FirstLine({"/usr/bin/dpkg", "--print-architecture"});
  ASSERT_FALSE(version.empty()) << "Debian's libgomp1 is not installed";
  ASSERT_TRUE(std::filesystem::exists(gomp)) << gomp;
  const auto dir = testing::ScratchDir("owners");
  const std::string own = dir + "/owners";
  std::filesystem::copy(kFx + "/classes/owners", own, std::filesystem::copy_options::recursive);
  const std::string trace = dir + "/t.ldscope";
  const auto r = RunCmd({LDSCOPE_BIN,
                         "run",
                         "-q",
                         "-o",
                         trace,
                         "--report",
                         dir + "/report.txt",
                         "--",
                         DLPROBE,
                         "open",
                         own + "/site-packages/ownedpkg/lib/libowned.so.1",
                         "open",
                         own + "/conda/lib/libowned.so.1",
                         "open",
                         own + "/loose/libowned.so.1",
                         "open",
                         gomp,
                         "open",
                         kFx + "/classes/omp/lib/libgomp.so.1",
                         "open",
                         own + "/conda/lib/libowned_app.so"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto machine = [&](std::string text) {
    text = testing::ReplaceAll(text, version, "${DPKG_VERSION}");
    text = testing::ReplaceAll(text, "(" + arch + ")", "(${DPKG_ARCH})");
    return testing::ReplaceAll(text, ":" + arch, ":${DPKG_ARCH}");
  };
  const std::string report = machine(testing::ReadFile(dir + "/report.txt"));
  testing::ExpectGolden("owners.txt", "== the command printed\n" + r.out + "\n== ldscope's diagnosis\n" + report);
  // Read where the packages' records are gone: the owners are the trace's.
  std::filesystem::remove_all(own + "/site-packages/ownedpkg-1.2.3.dist-info");
  std::filesystem::remove_all(own + "/conda/conda-meta");
  const auto again = RunCmd({LDSCOPE_BIN, "report", trace});
  EXPECT_EQ(machine(again.out), report);
}

// Files an RPM database lists, as rpm reads it: a private database (rpm --initdb) that
// ~/.rpmmacros names (%_dbpath), holding packages rpmbuild made. Three copies of one
// SONAME: one two packages share (rpm names both: the first is the owner), one a
// package with an epoch owns, one no package owns. Each finding names each file's RPM
// package, its [EPOCH:]VERSION-RELEASE and architecture, and the dnf command. Where
// ~/.rpmmacros names a database that does not exist, no file is owned by any package.
// The owners are those recorded when the trace was taken: with the database gone, the
// report says the same.
TEST(Owners, RpmDatabase) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/rpmbuild")) << "rpm is not installed (scripts/setup)";
  const auto dir = testing::ScratchDir("owners_rpm");
  const std::string shared = dir + "/opt/shared/libowned.so.1", vendored = dir + "/opt/vendor/libowned.so.1",
                    loose = dir + "/loose/libowned.so.1";
  for (const auto& p : {shared, vendored, loose}) {
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::filesystem::copy_file(kFx + "/classes/owners/loose/libowned.so.1", p);
  }
  // A package of empty files at those paths (only the database's record of it is
  // installed).
  auto package = [&](const std::string& name, const std::string& evr, const std::vector<std::string>& files) {
    const std::string epoch = evr.find(':') == std::string::npos ? "" : evr.substr(0, evr.find(':'));
    const std::string vr = evr.substr(epoch.empty() ? 0 : epoch.size() + 1);
    std::string spec = "Name: " + name + "\n" + (epoch.empty() ? "" : "Epoch: " + epoch + "\n") +
                       "Version: " + vr.substr(0, vr.find('-')) + "\nRelease: " + vr.substr(vr.find('-') + 1) +
                       "\nSummary: ldscope test package\nLicense: MIT\nBuildArch: noarch\n"
                       "%description\nldscope test package\n%install\n";
    for (const auto& f : files)
      spec +=
          "mkdir -p %{buildroot}" + std::filesystem::path(f).parent_path().string() + "\ntouch %{buildroot}" + f + "\n";
    spec += "%files\n";
    for (const auto& f : files) spec += f + "\n";
    const std::string path = dir + "/" + name + ".spec";
    testing::WriteFile(path, spec);
    const auto r = RunCmd({"/usr/bin/rpmbuild", "--define", "_topdir " + dir + "/rpmbuild", "--define",
                           "__os_install_post %{nil}", "--define", "debug_package %{nil}", "-bb", path},
                          {"HOME=" + dir});  // rpmbuild opens ~/.rpmdb (Debian's %_dbpath)
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    return dir + "/rpmbuild/RPMS/noarch/" + name + "-" + vr + ".noarch.rpm";
  };
  const std::vector<std::string> packages = {package("ldscope-shared-a", "2.0-3", {shared}),
                                             package("ldscope-shared-b", "2.0-3", {shared}),
                                             package("ldscope-vendor", "1:4.5.6-7.el9", {vendored})};
  const std::string db = dir + "/rpmdb";
  auto r = RunCmd({"/usr/bin/rpm", "--dbpath", db, "--initdb"}, {"HOME=" + dir});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> install = {"/usr/bin/rpm", "--dbpath", db, "-i", "--nodeps", "--justdb", "--noscripts"};
  install.insert(install.end(), packages.begin(), packages.end());
  r = RunCmd(install, {"HOME=" + dir});
  ASSERT_EQ(r.code, 0) << r.err;
  auto traced = [&](const std::string& dbpath, const std::string& name) {
    const std::string home = dir + "/home-" + name;
    std::filesystem::create_directories(home);
    testing::WriteFile(home + "/.rpmmacros", "%_dbpath " + dbpath + "\n");
    const std::string trace = dir + "/" + name + ".ldscope";
    const auto run = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--report", dir + "/" + name + ".txt", "--",
                             DLPROBE, "open", shared, "open", vendored, "open", loose},
                            {"HOME=" + home});
    EXPECT_EQ(run.code, 0) << run.err;
    return testing::ReadFile(dir + "/" + name + ".txt");
  };
  const std::string report = traced(db, "rpmdb"), none = traced(dir + "/no-rpmdb", "no-rpmdb");
  testing::ExpectGolden("owners_rpm.txt", "== ~/.rpmmacros: %_dbpath ${SCRATCH}/rpmdb\n" + report +
                                              "\n== ~/.rpmmacros: %_dbpath ${SCRATCH}/no-rpmdb\n" + none);
  std::filesystem::remove_all(db);
  const auto again = RunCmd({LDSCOPE_BIN, "report", dir + "/rpmdb.ldscope"});
  EXPECT_EQ(again.out, report);
}

class HealthyStack : public ::testing::TestWithParam<Healthy> {};

TEST_P(HealthyStack, NoFindings) {
  const Healthy& h = GetParam();
  const auto dir = testing::ScratchDir("healthy_" + h.name);
  // A small C project for the make/gcc build: two objects and libm.
  testing::WriteFile(dir + "/Makefile", "prog: a.o b.o\n\t$(CC) -o $@ $^ -lm\n%.o: %.c\n\t$(CC) -O1 -c $< -o $@\n");
  testing::WriteFile(dir + "/a.c", "int f(void) { return 1; }\n");
  testing::WriteFile(dir + "/b.c", "#include <math.h>\nint f(void);\nint main(void) { return f() + (int)sqrt(4.0); }\n");
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", dir + "/t.ldscope", "--report",
                                  dir + "/report.txt", "--fail-on", "warning", "--"};
  cmd.insert(cmd.end(), h.argv.begin(), h.argv.end());
  if (h.name == "make_gcc") cmd.insert(cmd.end(), {"-C", dir});
  const auto r = RunCmd(cmd);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(testing::ReadFile(dir + "/report.txt"), "no findings\n");
  size_t loads = 0;
  const v1::Timeline t = testing::TimelineOf({dir + "/t.ldscope"});
  for (const auto& p : t.processes())
    loads += testing::LoadLines(p).size();
  EXPECT_GE(loads, h.min_loads) << "the workload loaded less than expected: is the package installed?";
}

INSTANTIATE_TEST_SUITE_P(Debian, HealthyStack, ::testing::ValuesIn(HealthyStacks()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ldscope
