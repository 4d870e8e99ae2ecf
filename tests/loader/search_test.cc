// The loader model against the real loader: for every library that glibc searched for
// in real runs (python3 with numpy, RUNPATH and RPATH fixtures, LD_LIBRARY_PATH), the
// model, asked "where would this requester's search find NAME?", must name the file
// glibc mapped, found by the same step.
#include <gtest/gtest.h>

#include <elf.h>

#include <cstddef>
#include <cstring>
#include <filesystem>

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
  loader::MachineCache cache;
  t.env.machines = &cache;
  EXPECT_EQ(t.Found(EM_X86_64), uncached_x86);
  EXPECT_EQ(t.Found(EM_AARCH64), uncached_arm);
  const loader::MachineCache expected = {{t.dir + "/arm/libfix_b.so", EM_AARCH64},
                                         {t.dir + "/none/libfix_b.so", 0},
                                         {t.dir + "/x86/libfix_b.so", EM_X86_64}};
  EXPECT_EQ(cache, expected);
  std::filesystem::remove_all(t.dir + "/arm");
  std::filesystem::remove_all(t.dir + "/x86");
  EXPECT_EQ(t.Found(EM_X86_64), uncached_x86);
  t.env.machines = nullptr;
  EXPECT_EQ(t.Found(EM_X86_64), "");
}

}  // namespace
}  // namespace ldscope
