// ldscope's Python hook, end to end, with every real CPython 3.8+ on the machine
// (Debian's /usr/bin/python3, and pyenv's where installed): loads attributed to the
// ctypes call, the import and the user's top-level import; the program's own output,
// tracebacks and exit status untouched; the environment's sitecustomize still run;
// nothing at all when ldscope is not collecting; threads, fork, import_module.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "support/test_support.h"

namespace ldscope {
namespace {

namespace fs = std::filesystem;
using testing::RunCmd;

const std::string kApp = PYFIXTURES_DIR "/app";
const std::string kSitePackages = FIXTURES "/site-packages";

// /usr/bin/python3 and every pyenv CPython >= 3.8.
// `ldscope run` of python with cwd = the app directory.
testing::Proc RunInApp(const std::vector<std::string>& ldscope_args, const std::string& python,
                       const std::vector<std::string>& script_args) {
  std::vector<std::string> argv = {"/usr/bin/env", "-C", kApp, LDSCOPE_BIN};
  argv.insert(argv.end(), ldscope_args.begin(), ldscope_args.end());
  argv.push_back("--");
  argv.push_back(python);
  argv.insert(argv.end(), script_args.begin(), script_args.end());
  return RunCmd(argv, {"PYTHONPATH=" + kSitePackages});
}

std::string Normalize(std::string s) {
  s = testing::ReplaceAll(s, FIXTURES, "${FIXTURES}");
  s = std::regex_replace(s, std::regex("process: [0-9]+ \\([^)]*\\)"), "process: ${PID} (${PYTHON})");
  return std::regex_replace(s, std::regex("\\+[0-9]+\\.[0-9] ms"), "+T ms");
}

const v1::ProcessTimeline* Main(const v1::Timeline& t) {
  for (const auto& p : t.processes())
    if (p.start_reason() == v1::START_EXEC) return &p;
  return nullptr;
}

const v1::Load* LoadOf(const v1::ProcessTimeline& p, const std::string& base) {
  for (const auto& e : p.entries())
    if (e.has_load() && fs::path(e.load().object().path()).filename() == base) return &e.load();
  return nullptr;
}

// import cupy; import torch: the finding names cupy's ctypes call and line, and the
// user's import lines; `show` says the same for each load.
TEST(Python, CupyThenTorchAttributedOnEveryInterpreter) {
  const std::string dir = testing::ScratchDir("python_attr");
  const std::string golden = GOLDEN_DIR "/python_cupy_then_torch.txt";
  for (const auto& py : testing::Pythons(8, 99)) {
    SCOPED_TRACE(py);
    const std::string trace = dir + "/t.ldscope", report = dir + "/report.txt";
    const auto r = RunInApp({"run", "-q", "-o", trace, "--report", report}, py, {"train.py"});
    EXPECT_EQ(r.code, 1) << r.err;  // the ImportError, as without ldscope
    EXPECT_NE(r.err.find("ImportError: " FIXTURES "/site-packages/torch/lib/libtorch_cuda.so: "
                         "undefined symbol: ncclCommRegister"), std::string::npos) << r.err;
    const std::string text = Normalize(testing::ReadFile(report));
    if (getenv("LDSCOPE_UPDATE_GOLDEN") != nullptr && py == "/usr/bin/python3")
      testing::WriteFile(golden, text);
    EXPECT_EQ(text, testing::ReadFile(golden));

    const auto show = RunCmd({LDSCOPE_BIN, "show", trace});
    ASSERT_EQ(show.code, 0) << show.err;
    const std::string s = testing::ReplaceAll(show.out, FIXTURES, "${FIXTURES}");
    for (const char* line : {
             "python ctypes.CDLL('${FIXTURES}/system/lib/libnccl.so.2.16.2') at "
             "cupy/_environment.py:11, during import cupy at train.py:3\n",
             "python import torch._C at torch/__init__.py:4, during import torch at train.py:4\n",
             "import torch failed at train.py:4: ImportError: ${FIXTURES}/site-packages/torch/lib/"
             "libtorch_cuda.so: undefined symbol: ncclCommRegister\n"})
      EXPECT_NE(s.find(line), std::string::npos) << line << "\n" << s;

    // JSON: the same cause, structured, on the finding's objects.
    const auto json = RunCmd({LDSCOPE_BIN, "report", "--format", "json", trace});
    EXPECT_NE(json.out.find("\"dlopenCall\": \"ctypes.CDLL('" FIXTURES "/system/lib/libnccl.so.2.16.2')\""),
              std::string::npos) << json.out;
    EXPECT_NE(json.out.find("\"topModule\": \"torch\""), std::string::npos) << json.out;

    // Chrome export: import spans, nested, with the loads inside them.
    ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--chrome", trace, "-o", dir + "/c.json"}).code, 0);
    google::protobuf::Struct chrome;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(testing::ReadFile(dir + "/c.json"), &chrome).ok());
    std::set<std::string> spans;  // "cat name" of each event
    for (const auto& v : chrome.fields().at("traceEvents").list_value().values()) {
      const auto& f = v.struct_value().fields();
      if (f.count("cat")) spans.insert(f.at("cat").string_value() + " " + f.at("name").string_value());
    }
    EXPECT_TRUE(spans.count("import import cupy"));
    EXPECT_TRUE(spans.count("import import torch._C"));
    EXPECT_TRUE(std::any_of(spans.begin(), spans.end(), [](const std::string& s) {
      return s.rfind("dlopen ctypes.CDLL('", 0) == 0;
    }));
  }
}

// The program sees no difference: stdout, stderr (tracebacks through importlib
// included), exit status, sys.path, sitecustomize, stack depth.
TEST(Python, HookLeavesTheProgramAlone) {
  const std::string dir = testing::ScratchDir("python_alone");
  for (const auto& py : testing::Pythons(8, 99)) {
    SCOPED_TRACE(py);
    const auto bare = RunCmd({"/usr/bin/env", "-C", kApp, py, "behaviour.py"}, {"PYTHONPATH=" + kSitePackages});
    const auto traced = RunInApp({"run", "-q", "--no-report", "-o", dir + "/t.ldscope"}, py,
                                 {"behaviour.py"});
    EXPECT_EQ(bare.code, 1);
    EXPECT_EQ(traced.code, bare.code);
    EXPECT_EQ(traced.out, bare.out);
    EXPECT_EQ(traced.err, bare.err);
    EXPECT_NE(bare.out.find("RuntimeError: broken at import"), std::string::npos) << bare.out;
    // ... and the hook did run in it.
    const v1::Timeline t = testing::TimelineOf({dir + "/t.ldscope"});
    const v1::ProcessTimeline* p = Main(t);
    ASSERT_NE(p, nullptr);
    EXPECT_FALSE(p->python().version().empty());
    bool saw_json = false;
    for (const auto& im : p->imports()) saw_json |= im.module() == "json" && im.ended();
    EXPECT_TRUE(saw_json) << p->imports_size() << " imports";
  }
}

// The environment's own sitecustomize (on PYTHONPATH) still runs, once, and is the
// module named sitecustomize.
TEST(Python, ChainsToTheEnvironmentsSitecustomize) {
  const std::string dir = testing::ScratchDir("python_chain");
  const std::string code =
      "import sitecustomize, sys; print(sitecustomize.__file__); print(sys.path[1:2])";
  for (const auto& py : testing::Pythons(8, 99)) {
    SCOPED_TRACE(py);
    const std::vector<std::string> env = {"PYTHONPATH=" PYFIXTURES_DIR "/own_site"};
    const auto bare = RunCmd({py, "-c", code}, env);
    const auto traced =
        RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/t.ldscope", "--", py, "-c", code}, env);
    EXPECT_EQ(bare.out, "own sitecustomize ran\n" PYFIXTURES_DIR "/own_site/sitecustomize.py\n['" PYFIXTURES_DIR
                        "/own_site']\n");
    EXPECT_EQ(traced.out, bare.out);
    EXPECT_EQ(traced.err, bare.err);
    EXPECT_FALSE(Main(testing::TimelineOf({dir + "/t.ldscope"}))->python().version().empty());
  }
}

// Not collecting (the hook on PYTHONPATH without a collector, or with a socket nobody
// listens on): nothing imported, nothing printed, nothing different.
TEST(Python, InertWhenNotCollecting) {
  const std::string code = "import sys; print('_socket' in sys.modules, sys.path[1:])";
  for (const auto& py : testing::Pythons(8, 99)) {
    SCOPED_TRACE(py);
    const auto bare = RunCmd({py, "-c", code}, {}, {"PYTHONPATH", "LDSCOPE_SOCKET"});
    const auto off = RunCmd({py, "-c", code}, {"PYTHONPATH=" PYTHON_HOOK_DIR}, {"LDSCOPE_SOCKET"});
    const auto gone = RunCmd({py, "-c", code},
                             {"PYTHONPATH=" PYTHON_HOOK_DIR, "LDSCOPE_SOCKET=/nonexistent/ldscope.sock"});
    EXPECT_EQ(bare.out.rfind("False ", 0), 0u) << bare.out;
    for (const auto* r : {&off, &gone}) {
      EXPECT_EQ(r->code, 0);
      EXPECT_EQ(r->out, bare.out);
      EXPECT_EQ(r->err, "");
    }
  }
}

// The same script with the import order swapped: `ldscope diff` says which import now
// loads the first NCCL, and which finding that brought.
TEST(Python, DiffNamesTheImportThatNowLoadsALibraryFirst) {
  const std::string dir = testing::ScratchDir("python_diff");
  for (const std::string order : {"torch,cupy", "cupy,torch"}) {
    const auto r = RunCmd({"/usr/bin/env", "-C", kApp, "ORDER=" + order, LDSCOPE_BIN, "run", "-q",
                           "--no-report", "-o", dir + "/" + order + ".ldscope", "--",
                           "/usr/bin/python3", "ordered.py"},
                          {"PYTHONPATH=" + kSitePackages});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const auto d = RunCmd({LDSCOPE_BIN, "diff", "--fail-on", "new-findings", dir + "/torch,cupy.ldscope",
                         dir + "/cupy,torch.ldscope"});
  EXPECT_EQ(d.code, 3) << d.err;
  const std::string out = testing::ReplaceAll(d.out, FIXTURES, "${FIXTURES}");
  EXPECT_NE(out.find("  ~ first libnccl library: was ${FIXTURES}/site-packages/nvidia/nccl/lib/"
                     "libnccl.so.2 loaded as a NEEDED of ${FIXTURES}/site-packages/torch/lib/"
                     "libtorch_cuda.so (found via RPATH), for import torch._C at torch/__init__.py:4, "
                     "during import torch at ordered.py:8; now ${FIXTURES}/system/lib/"
                     "libnccl.so.2.16.2 loaded by ctypes.CDLL('${FIXTURES}/system/lib/"
                     "libnccl.so.2.16.2') at cupy/_environment.py:11, during import cupy at "
                     "ordered.py:8\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("new error[missing-symbol]: "), std::string::npos) << out;
}

// The program closes the hook's descriptor and puts a socket of its own at that number:
// the hook notices (inode) and never writes to it.
TEST(Python, NeverWritesToADescriptorNoLongerItsOwn) {
  const std::string dir = testing::ScratchDir("python_fd");
  for (const auto& py : testing::Pythons(8, 99)) {
    SCOPED_TRACE(py);
    const auto r = RunInApp({"run", "-q", "--no-report", "-o", dir + "/t.ldscope"}, py, {"fd_reuse.py"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "[b'mine']\n");
    EXPECT_EQ(r.err, "");
  }
}

// cupy imported in a thread, torch through importlib.import_module in a forked child:
// each load attributed on its own thread and in its own process.
TEST(Python, ThreadsForkAndImportModule) {
  const std::string dir = testing::ScratchDir("python_fork");
  for (const auto& py : testing::Pythons(8, 99)) {
    SCOPED_TRACE(py);
    const auto r = RunInApp({"run", "-q", "--no-report", "-o", dir + "/t.ldscope"}, py,
                            {"threads_fork.py"});
    ASSERT_EQ(r.code, 0) << r.err;
    const v1::Timeline t = testing::TimelineOf({dir + "/t.ldscope"});
    const v1::ProcessTimeline* parent = Main(t);
    ASSERT_NE(parent, nullptr);
    const v1::Load* nccl = LoadOf(*parent, "libnccl.so.2.16.2");
    ASSERT_NE(nccl, nullptr);
    EXPECT_EQ(nccl->python().top_module(), "cupy");
    EXPECT_EQ(nccl->python().top_site().line(), 8u);
    EXPECT_EQ(nccl->python().call_site().line(), 11u);
    EXPECT_EQ(nccl->python().dlopen_call().rfind("ctypes.CDLL('", 0), 0u);
    bool on_thread = false;
    for (const auto& e : parent->entries())
      if (e.has_load() && &e.load() == nccl) on_thread = e.tid() != parent->pid();
    EXPECT_TRUE(on_thread) << "loaded on the thread that imported cupy";

    const v1::ProcessTimeline* child = nullptr;
    for (const auto& p : t.processes())
      if (p.start_reason() == v1::START_FORK) child = &p;
    ASSERT_NE(child, nullptr);
    const v1::Load* ext = LoadOf(*child, "_C.abi3.so");
    ASSERT_NE(ext, nullptr);
    EXPECT_EQ(ext->python().import_module(), "torch._C");
    EXPECT_EQ(ext->python().top_module(), "torch");
    EXPECT_EQ(ext->python().top_site().line(), 17u);  // the import_module call
    EXPECT_EQ(child->python().streams(), 1u);
    EXPECT_EQ(parent->python().streams(), 1u);
  }
}

}  // namespace
}  // namespace ldscope
