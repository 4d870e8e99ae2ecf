// The loader model against the real loader: for every library that glibc searched for
// in real runs (python3 with numpy, RUNPATH and RPATH fixtures, LD_LIBRARY_PATH), the
// model, asked "where would this requester's search find NAME?", must name the file
// glibc mapped, found by the same step.
#include <gtest/gtest.h>

#include <elf.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <map>

#include "analysis/context.h"
#include "render/words.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

struct Workload {
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

TEST(LoaderModel, AgreesWithGlibcOnEverySearchedLoad) {
  const std::string fx = FIXTURES;
  const std::vector<Workload> runs = {
      {{"/usr/bin/python3", "-c",
        "import numpy, ssl, sqlite3, ctypes, lzma, bz2, decimal, uuid, readline, curses, "
        "xml.etree.ElementTree, hashlib, ctypes.util\n"
        "for n in ['libz.so.1', 'libstdc++.so.6', 'libgcc_s.so.1', 'libdl.so.2', 'librt.so.1', "
        "'libpthread.so.0', 'libutil.so.1', 'libresolv.so.2', 'libanl.so.1', 'libgomp.so.1', "
        "'libquadmath.so.0', 'libatomic.so.1']:\n try: ctypes.CDLL(n)\n except OSError: pass"},
       {}},
      {{"/usr/bin/python3", SCENARIOS_DIR "/torch_then_cupy.py", fx}, {}},
      {{"/usr/bin/python3", SCENARIOS_DIR "/nvjitlink_ld_library_path.py", fx},
       {"LD_LIBRARY_PATH=" + fx + "/cuda-12.1/lib64"}},
      {{DLPROBE, "open", fx + "/lib/libfix_a.so", "open", "libm.so.6", "lazy", "libz.so.1"},
       {"LD_LIBRARY_PATH=/nonexistent:" + fx + "/lib/threads"}},
      {{DLPROBE, "open", "libfix_t3.so"}, {"LD_LIBRARY_PATH=" + fx + "/lib/threads"}},
      // 32-bit and aarch64 copies first: skipped; an empty element (the working
      // directory) first, for every library of the process.
      {{DLPROBE, "open", "libsf_x.so"},
       {"LD_LIBRARY_PATH=:" + fx + "/classes/search/lib32:" + fx + "/classes/search/arm64:" + fx +
        "/classes/search/lib64"}},
      // An RPATH ending in an empty element; a library found through a symbolic link.
      {{DLPROBE, "open", fx + "/classes/search/app/libsf_rpath.so", "open", fx + "/classes/search/origin/b/libg.so"},
       {"LD_LIBRARY_PATH=" + fx + "/classes/search/origin/a"}},
  };
  size_t checked = 0;
  std::map<std::string, int> steps;
  const auto dir = testing::ScratchDir("loader_model");
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string trace = dir + "/" + std::to_string(i) + ".ldscope";
    std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", trace, "--"};
    cmd.insert(cmd.end(), runs[i].argv.begin(), runs[i].argv.end());
    const auto r = testing::RunCmd(cmd, runs[i].env);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto t = testing::TimelineOf({trace});
    analysis::Context ctx(t);
    for (const auto& pi : ctx.processes()) {
      for (const auto& [id, o] : pi.objects) {
        if (o.load == nullptr || o.load->tried_size() == 0) continue;
        const std::string& name = o.load->requested_name();
        if (name.find('/') != std::string::npos) continue;
        auto req = pi.objects.find(o.requester);
        ASSERT_NE(req, pi.objects.end());
        const auto model = loader::Search(name, pi.AsRequester(req->second, ctx.files()),
                                          pi.LoaderChain(req->second, ctx.files()), pi.env);
        EXPECT_TRUE(ctx.SameFile(model.path, o.path))
            << name << " requested by " << req->second.path << ": glibc mapped " << o.path
            << ", the model says " << model.path;
        const std::string glibc_step = render::FoundByWord(*o.load);
        EXPECT_EQ(render::StepWord(model.step), glibc_step) << name << " -> " << o.path;
        ++steps[glibc_step];
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 40u) << "enough real cases";
  for (const char* s : {"RPATH", "RUNPATH", "LD_LIBRARY_PATH", "ld.so.cache"})
    EXPECT_GT(steps[s], 0) << "a case found by " << s;
}

// libfix_b.so in dir/x86 as built and in dir/arm with its e_machine made aarch64's, each
// directory on LD_LIBRARY_PATH (with dir/none, which has no file, between them).
struct TwoMachines {
  explicit TwoMachines(const std::string& scratch) : dir(testing::ScratchDir(scratch)) {
    const std::string x86 = testing::ReadFile(FIXTURES "/lib/libfix_b.so");
    std::string arm = x86;
    const uint16_t aarch64 = EM_AARCH64;
    std::memcpy(arm.data() + offsetof(Elf64_Ehdr, e_machine), &aarch64, sizeof aarch64);
    std::filesystem::create_directories(dir + "/arm");
    std::filesystem::create_directories(dir + "/x86");
    testing::WriteFile(dir + "/arm/libfix_b.so", arm);
    testing::WriteFile(dir + "/x86/libfix_b.so", x86);
    env.ld_library_path = {dir + "/arm", dir + "/none", dir + "/x86"};
    requester.path = dir + "/app";
  }
  // What a search for libfix_b.so by a process of that machine finds: the first match,
  // then every later one.
  std::string Found(uint16_t machine) {
    env.machine = machine;
    const loader::Result r = loader::Search("libfix_b.so", requester, {}, env, /*keep_going=*/true);
    std::string later;
    for (const auto& m : r.later) later += " " + m.path;
    return r.path + later;
  }
  const std::string dir;
  loader::Environment env;
  loader::Object requester;
};

// ld.so skips a candidate built for another machine (open_verify: the ELF header's
// e_machine against its own) and searches on; the model does the same with the traced
// process's machine (its executable's), x86-64 and aarch64 alike.
TEST(LoaderModel, SkipsCandidatesOfAnotherMachine) {
  TwoMachines t("loader_machine");
  EXPECT_EQ(t.Found(EM_X86_64), t.dir + "/x86/libfix_b.so");
  EXPECT_EQ(t.Found(EM_AARCH64), t.dir + "/arm/libfix_b.so");
  EXPECT_EQ(t.Found(0), t.dir + "/" + (elf::HostMachine() == EM_AARCH64 ? "arm" : "x86") + "/libfix_b.so");
}

// With a MachineCache (an analysis's), each candidate is opened once: the answers are
// the same, the cache holds every candidate's e_machine, and later searches answer from
// it (here after the files are gone).
TEST(LoaderModel, ACacheOpensEachCandidateOnce) {
  TwoMachines t("loader_machine_cache");
  const std::string uncached_x86 = t.Found(EM_X86_64), uncached_arm = t.Found(EM_AARCH64);
  loader::IdentCache cache;
  t.env.idents = &cache;
  EXPECT_EQ(t.Found(EM_X86_64), uncached_x86);
  EXPECT_EQ(t.Found(EM_AARCH64), uncached_arm);
  std::map<std::string, uint16_t> machines;
  for (const auto& [path, id] : cache) machines[path] = id.kind == elf::Ident::Kind::kElf ? id.machine : 0;
  const std::map<std::string, uint16_t> expected = {{t.dir + "/arm/libfix_b.so", EM_AARCH64},
                                                    {t.dir + "/none/libfix_b.so", 0},
                                                    {t.dir + "/x86/libfix_b.so", EM_X86_64}};
  EXPECT_EQ(machines, expected);
  std::filesystem::remove_all(t.dir + "/arm");
  std::filesystem::remove_all(t.dir + "/x86");
  EXPECT_EQ(t.Found(EM_X86_64), uncached_x86);
  t.env.idents = nullptr;
  EXPECT_EQ(t.Found(EM_X86_64), "");
}

const std::string kSf = FIXTURES "/classes/search";

// An empty element of LD_LIBRARY_PATH or of an RPATH is the working directory
// (fillin_rpath keeps it as a directory of length 0); an empty list is no list.
TEST(LoaderModel, EmptyElementIsTheWorkingDirectory) {
  loader::Environment env;
  env.cwd = kSf + "/work";
  env.ld_library_path = loader::SplitSearchPath(":" + kSf + "/opt");
  ASSERT_EQ(env.ld_library_path.size(), 2u);
  loader::Object app;
  app.path = kSf + "/app/libsf_app.so";
  loader::Result r = loader::Search("libsf_util.so.1", app, {}, env);
  EXPECT_EQ(r.path, kSf + "/work/libsf_util.so.1");
  EXPECT_EQ(r.step, v1::STEP_LD_LIBRARY_PATH);
  env.ld_library_path = loader::SplitSearchPath(kSf + "/opt");
  EXPECT_EQ(loader::Search("libsf_util.so.1", app, {}, env).path, kSf + "/opt/libsf_util.so.1");
  env.ld_library_path.clear();
  app.rpath = "/nonexistent::" + kSf + "/opt";
  r = loader::Search("libsf_util.so.1", app, {}, env);
  EXPECT_EQ(r.path, kSf + "/work/libsf_util.so.1");
  EXPECT_EQ(r.step, v1::STEP_RPATH);
  EXPECT_TRUE(loader::SplitSearchPath("").empty());
  EXPECT_EQ(loader::EmptyElements("a::b:"), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(loader::EmptyElements(":/opt/x"), (std::vector<size_t>{0}));
}

// $ORIGIN is the directory of the name an object was opened by: b/libg.so, a link to
// a/libg.so, searches b/.
TEST(LoaderModel, OriginIsTheDirectoryOfTheNameOpened) {
  loader::Environment env;
  loader::Object g;
  g.rpath = "$ORIGIN";
  g.path = kSf + "/origin/b/libg.so";
  EXPECT_EQ(loader::Search("libf.so", g, {}, env).path, "");
  g.path = kSf + "/origin/a/libg.so";
  EXPECT_EQ(loader::Search("libf.so", g, {}, env).path, kSf + "/origin/a/libf.so");
}

// Files of another class or machine are skipped (and listed); a file that is not a
// library ends the search there, whatever comes later.
TEST(LoaderModel, JudgesFilesAsOpenVerifyDoes) {
  loader::Environment env;
  env.machine = EM_X86_64;
  env.ld_library_path = {kSf + "/lib32", kSf + "/arm64", kSf + "/lib64"};
  loader::Object req;
  req.path = "/bin/app";
  loader::Result r = loader::Search("libsf_x.so", req, {}, env);
  EXPECT_EQ(r.path, kSf + "/lib64/libsf_x.so");
  ASSERT_EQ(r.skipped.size(), 2u);
  EXPECT_EQ(r.skipped[0].path, kSf + "/lib32/libsf_x.so");
  EXPECT_EQ(r.skipped[1].path, kSf + "/arm64/libsf_x.so");
  EXPECT_EQ(loader::Judge(elf::IdentOf(kSf + "/lib32/libsf_x.so"), EM_X86_64), loader::Verdict::kOtherClass);
  EXPECT_EQ(loader::Judge(elf::IdentOf(kSf + "/arm64/libsf_x.so"), EM_X86_64), loader::Verdict::kOtherMachine);
  EXPECT_EQ(loader::Judge(elf::IdentOf(kSf + "/arm64/libsf_x.so"), EM_AARCH64), loader::Verdict::kUse);
  env.ld_library_path = {kSf + "/script", kSf + "/opt"};
  r = loader::Search("libsf_util.so", req, {}, env, /*keep_going=*/true);
  EXPECT_EQ(r.path, "");
  EXPECT_EQ(r.stopped.path, kSf + "/script/libsf_util.so");
  EXPECT_EQ(loader::StopError(elf::IdentOf(r.stopped.path)), "invalid ELF header");
  const std::string dir = testing::ScratchDir("loader_judge");
  testing::WriteFile(dir + "/short.so", "INPUT(libc.so.6)\n");
  EXPECT_EQ(loader::StopError(elf::IdentOf(dir + "/short.so")), "file too short");
  EXPECT_EQ(loader::Judge(elf::IdentOf(dir), EM_X86_64), loader::Verdict::kStop);  // a directory
  EXPECT_EQ(loader::Judge(elf::IdentOf(dir + "/absent.so"), EM_X86_64), loader::Verdict::kAbsent);
}

// -z nodefaultlib drops the ld.so.cache entries that lie in a default directory (prefix
// match: subdirectories too) and the default directories; other entries stay.
TEST(LoaderModel, NodeflibSkipsOnlyCacheEntriesInDefaultDirs) {
  loader::LdCache cache;
  ASSERT_TRUE(cache.Load().ok());
  const std::string libc = cache.Lookup("libc.so.6");
  ASSERT_FALSE(libc.empty());
  const std::string libc_dir = libc.substr(0, libc.rfind('/'));
  loader::Environment env;
  env.cache = &cache;
  loader::Object exe;
  exe.path = kSf + "/nodeflib/exe_a";
  exe.nodeflib = true;
  env.default_dirs = {libc_dir};
  EXPECT_EQ(loader::Search("libc.so.6", exe, {}, env).path, "");
  env.default_dirs = {libc_dir.substr(0, libc_dir.rfind('/'))};  // its parent: a prefix still
  EXPECT_EQ(loader::Search("libc.so.6", exe, {}, env).path, "");
  env.default_dirs = {"/nonexistent/lib"};
  const loader::Result r = loader::Search("libc.so.6", exe, {}, env);
  EXPECT_EQ(r.path, libc);
  EXPECT_EQ(r.step, v1::STEP_LD_SO_CACHE);
  exe.nodeflib = false;
  env.default_dirs = {libc_dir};
  EXPECT_EQ(loader::Search("libc.so.6", exe, {}, env).path, libc);
}

}  // namespace
}  // namespace ldscope
