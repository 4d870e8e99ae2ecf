// Each analysis pass on its own, over traces of the fixture scenarios recorded with the
// real loader: what that pass (and only it) reports.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <regex>
#include <set>

#include "analysis/analysis.h"
#include "analysis/pip_owner.h"
#include "analysis/py_statements.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

const std::string kFx = FIXTURES;

v1::Timeline Record(const std::string& name, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env = {}) {
  const auto dir = testing::ScratchDir("passes_" + name);
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/t.ldscope", "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  const auto r = testing::RunCmd(cmd, env);
  EXPECT_EQ(r.code, 0) << r.err;
  return testing::TimelineOf({dir + "/t.ldscope"});
}

std::vector<std::string> Python(const std::string& script) {
  return {"/usr/bin/python3", SCENARIOS_DIR "/" + script, kFx};
}

template <typename Pass>
v1::Report RunPass(const v1::Timeline& t, Pass pass) {
  analysis::Context ctx(t);
  v1::Report r;
  pass(ctx, &r);
  return r;
}

// What the passes read of a load (Obj::load) is shared by the loads alike: loads that
// differ only in the object's or requester's reference, the base address or the
// rolled-back mark (each object has its own) share one; a difference in anything else
// makes another. Every field of Load, Candidate, Reuse and ObjectRef is one or the other
// here, so that a field added to the schema fails this test until it is placed.
TEST(Context, LoadsAlikeShareWhatThePassesRead) {
  v1::Load base;
  base.mutable_object()->set_id(2);
  base.mutable_object()->set_path("/opt/liba.so");
  base.set_reason(v1::LOAD_DLOPEN);
  base.set_requested_name("liba.so");
  base.mutable_requester()->set_id(1);
  auto* c = base.add_tried();
  c->set_path("/opt/liba.so");
  c->set_step(v1::STEP_RPATH);
  base.set_base(0x7000);
  base.set_dev(1);
  base.set_ino(2);
  base.set_build_id("ab");
  base.add_needed("libc.so.6");
  base.set_rpath("$ORIGIN");
  base.set_runpath("/r");
  auto* r = base.add_reused();
  r->set_name("libc.so.6");
  r->mutable_object()->set_id(3);
  r->set_matched_by("SONAME");
  base.mutable_python()->set_top_module("a");
  base.set_dlopen_mode(1);
  using Change = std::function<void(v1::Load*)>;
  const std::vector<std::pair<std::string, Change>> alike = {
      {"object", [](v1::Load* l) { l->mutable_object()->set_id(9); }},
      {"object path", [](v1::Load* l) { l->mutable_object()->set_path("/elsewhere/liba.so"); }},
      {"requester", [](v1::Load* l) { l->mutable_requester()->set_id(8); }},
      {"base", [](v1::Load* l) { l->set_base(0x9000); }},
      {"rolled_back", [](v1::Load* l) { l->set_rolled_back(true); }},
      // A reuse's object is read by its id (`report`'s parts carry no more).
      {"reused object path", [](v1::Load* l) { l->mutable_reused(0)->mutable_object()->set_path("/l"); }},
      {"reused object soname", [](v1::Load* l) { l->mutable_reused(0)->mutable_object()->set_soname("s"); }},
      {"reused object lmid", [](v1::Load* l) { l->mutable_reused(0)->mutable_object()->set_lmid(1); }},
  };
  const std::vector<std::pair<std::string, Change>> different = {
      {"reason", [](v1::Load* l) { l->set_reason(v1::LOAD_NEEDED); }},
      {"requested_name", [](v1::Load* l) { l->set_requested_name("liba.so.1"); }},
      {"tried path", [](v1::Load* l) { l->mutable_tried(0)->set_path("/x/liba.so"); }},
      {"tried step", [](v1::Load* l) { l->mutable_tried(0)->set_step(v1::STEP_RUNPATH); }},
      {"tried flag", [](v1::Load* l) { l->mutable_tried(0)->set_flag(4); }},
      {"tried count", [](v1::Load* l) { l->add_tried()->set_path("/y/liba.so"); }},
      {"dev", [](v1::Load* l) { l->set_dev(5); }},
      {"ino", [](v1::Load* l) { l->set_ino(5); }},
      {"build_id", [](v1::Load* l) { l->set_build_id("cd"); }},
      {"needed", [](v1::Load* l) { l->set_needed(0, "libm.so.6"); }},
      {"needed count", [](v1::Load* l) { l->add_needed("libm.so.6"); }},
      {"rpath", [](v1::Load* l) { l->set_rpath("/other"); }},
      {"runpath", [](v1::Load* l) { l->set_runpath("/other"); }},
      {"reused name", [](v1::Load* l) { l->mutable_reused(0)->set_name("libm.so.6"); }},
      {"reused object id", [](v1::Load* l) { l->mutable_reused(0)->mutable_object()->set_id(4); }},
      {"reused matched_by", [](v1::Load* l) { l->mutable_reused(0)->set_matched_by("file name"); }},
      {"reused loaded_earlier", [](v1::Load* l) { l->mutable_reused(0)->set_loaded_earlier(true); }},
      {"python", [](v1::Load* l) { l->mutable_python()->set_top_module("b"); }},
      {"python unset", [](v1::Load* l) { l->clear_python(); }},
      {"dlopen_mode", [](v1::Load* l) { l->set_dlopen_mode(2); }},
      {"dlopen_mode unset", [](v1::Load* l) { l->clear_dlopen_mode(); }},
  };
  // The schema's fields, each placed above (by its name's first word).
  std::set<std::string> placed;
  for (const auto& list : {alike, different})
    for (const auto& [what, change] : list) placed.insert(what.substr(0, what.find(' ')));
  for (const auto* d : {v1::Load::descriptor()})
    for (int i = 0; i < d->field_count(); ++i) EXPECT_EQ(placed.count(d->field(i)->name()), 1u) << d->field(i)->name();
  EXPECT_EQ(v1::Candidate::descriptor()->field_count(), 3);  // path, step, flag
  EXPECT_EQ(v1::Reuse::descriptor()->field_count(), 4);      // name, object, matched_by, loaded_earlier
  EXPECT_EQ(v1::ObjectRef::descriptor()->field_count(), 4);  // id, path, soname, lmid

  v1::Timeline t;
  auto* p = t.add_processes();
  auto add = [&](const v1::Load& l) {
    auto* e = p->add_entries();
    e->set_seq(static_cast<uint64_t>(p->entries_size()));
    *e->mutable_load() = l;
    auto* row = p->add_objects();
    row->mutable_object()->set_id(static_cast<uint64_t>(p->objects_size()));
    row->set_load_entry(static_cast<uint32_t>(p->entries_size()));
  };
  add(base);
  for (const auto& list : {alike, different})
    for (const auto& [what, change] : list) {
      v1::Load l = base;
      change(&l);
      add(l);
    }
  const analysis::Context ctx(t);
  ASSERT_EQ(ctx.processes().size(), 1u);
  const auto& objects = ctx.processes()[0].objects;
  ASSERT_EQ(objects.size(), 1 + alike.size() + different.size());
  const v1::Load* facts = objects.begin()->second.load;
  size_t i = 1;
  for (const auto& [what, change] : alike) EXPECT_EQ(std::next(objects.begin(), i++)->second.load, facts) << what;
  for (const auto& [what, change] : different) EXPECT_NE(std::next(objects.begin(), i++)->second.load, facts) << what;
}

// A library's family: its base name up to ".so", less a wheel's hash suffix
// ("-[0-9a-f]{8}" at the end), as the regex below computes it.
TEST(Passes, FamilyDropsTheWheelHashAsTheRegexDoes) {
  const std::regex wheel_suffix("-[0-9a-f]{8}$");
  for (const std::string name :
       {"libgomp-a34b3233.so.1", "/x/y/libopenblas64_p-r0-0cf96a72.3.23.dev.so", "libfoo-1A2B3C4D.so",
        "libx-deadbeef-deadbeef.so", "-deadbeef", "deadbeef", "-deadbee", "lib-0123456789.so",
        "libnccl.so.2.16.2", "libc.so.6", "", "/a/b/", "libq-abcdefgh.so", "lib-abcdef01x.so",
        "libz-0000000g", "libm-12345678.so.so"}) {
    std::string n = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
    if (n.find(".so") != std::string::npos) n = n.substr(0, n.find(".so"));
    EXPECT_EQ(analysis::Family(name), std::regex_replace(n, wheel_suffix, "")) << name;
  }
  EXPECT_EQ(analysis::Family("libgomp-a34b3233.so.1"), "libgomp");
}

TEST(Passes, DuplicatesSeeTwoNcclsOnlyWhenBothAreLoaded) {
  const auto two = RunPass(Record("dup2", Python("torch_then_cupy.py")), analysis::FindDuplicates);
  ASSERT_EQ(two.findings_size(), 1);
  EXPECT_EQ(two.findings(0).kind(), v1::DUPLICATE_LIBRARY);
  ASSERT_EQ(two.findings(0).objects_size(), 2);
  EXPECT_EQ(two.findings(0).objects(0).version(), "NCCL 2.20.5+cuda12.4");
  EXPECT_EQ(two.findings(0).objects(1).version(), "NCCL 2.16.2+cuda11.8");
  const auto one = RunPass(Record("dup1", Python("cupy_then_torch.py")), analysis::FindDuplicates);
  EXPECT_EQ(one.findings_size(), 0) << "the reused NCCL is one copy";
  const auto ns = RunPass(Record("dupns", {DLPROBE, "open", kFx + "/lib/libfix_b.so", "mopen",
                                           kFx + "/lib/libfix_b.so"}),
                          analysis::FindDuplicates);
  ASSERT_EQ(ns.findings_size(), 1);
  EXPECT_EQ(ns.findings(0).kind(), v1::DUPLICATE_INFO);
  EXPECT_EQ(ns.findings(0).severity(), v1::INFO);
}

// glibc's RPATH walk follows l_loader, which a dlopen leaves empty: the loaders of a
// ctypes-loaded library's dependency are that library and then the executable, not
// _ctypes' extension module that called dlopen.
TEST(Passes, LoaderChainStopsAtADlopenedObject) {
  const v1::Timeline t = Record("chain", Python("torch_then_cupy.py"));
  analysis::Context ctx(t);
  ASSERT_EQ(ctx.processes().size(), 1u);
  const analysis::ProcessIndex& pi = ctx.processes()[0];
  const analysis::Obj* torch = nullptr;
  const analysis::Obj* nccl = nullptr;
  for (const auto& [id, o] : pi.objects) {
    if (o.path == kFx + "/site-packages/torch/lib/libtorch_cuda.so") torch = &o;
    if (torch != nullptr && o.requester == torch->id && o.soname == "libnccl.so.2") nccl = &o;
  }
  ASSERT_NE(torch, nullptr);
  ASSERT_NE(nccl, nullptr);
  ASSERT_EQ(nccl->requester, torch->id) << "a NEEDED of libtorch_cuda";
  ASSERT_NE(pi.Executable(), nullptr);
  const std::string exe = pi.Executable()->path;
  auto paths = [&](const analysis::Obj& o) {
    std::vector<std::string> out;
    for (const auto& l : pi.LoaderChain(o, ctx.files())) out.push_back(l.path);
    return out;
  };
  EXPECT_NE(pi.objects.at(torch->requester).path, exe) << "dlopen called from _ctypes";
  EXPECT_EQ(paths(*torch), std::vector<std::string>{exe});
  EXPECT_EQ(paths(*nccl), (std::vector<std::string>{torch->path, exe}));
}

TEST(Passes, ShadowingNamesTheEarlierObjectAndTheFileTheRpathHolds) {
  const auto r = RunPass(Record("shadow", Python("cupy_then_torch.py")), analysis::FindShadowing);
  ASSERT_EQ(r.findings_size(), 1);
  const auto& f = r.findings(0);
  EXPECT_EQ(f.kind(), v1::SHADOWED_DEPENDENCY);
  EXPECT_EQ(f.severity(), v1::ERROR) << "the requester then failed to load";
  EXPECT_EQ(f.objects(0).path(), kFx + "/system/lib/libnccl.so.2.16.2");
  EXPECT_EQ(f.objects(1).path(), kFx + "/site-packages/torch/lib/libtorch_cuda.so");
  EXPECT_EQ(f.objects(2).path(), kFx + "/site-packages/nvidia/nccl/lib/libnccl.so.2");
  EXPECT_EQ(f.objects(2).found_by(), "RPATH");
  const auto order = RunPass(Record("order", Python("nvjitlink_ld_library_path.py"),
                                    {"LD_LIBRARY_PATH=" + kFx + "/cuda-12.1/lib64"}),
                             analysis::FindShadowing);
  ASSERT_EQ(order.findings_size(), 1);
  EXPECT_EQ(order.findings(0).kind(), v1::SEARCH_ORDER_SHADOWING);
  EXPECT_EQ(order.findings(0).objects(2).path(),
            kFx + "/site-packages/nvidia/nvjitlink/lib/libnvJitLink.so.12");
  const auto none = RunPass(Record("noshadow", Python("torch_then_cupy.py")), analysis::FindShadowing);
  EXPECT_EQ(none.findings_size(), 0);
}

TEST(Passes, MissingSymbolsBoundToAndProvider) {
  const auto r = RunPass(Record("missing", Python("cupy_then_torch.py")), analysis::FindMissingSymbols);
  ASSERT_EQ(r.findings_size(), 1);
  ASSERT_EQ(r.findings(0).missing_size(), 1) << "only ncclCommRegister: Py_IsInitialized is in the "
                                                "global scope (the python executable)";
  const auto& m = r.findings(0).missing(0);
  EXPECT_EQ(m.name(), "ncclCommRegister");
  EXPECT_EQ(m.bound_to(), kFx + "/system/lib/libnccl.so.2.16.2");
  EXPECT_EQ(m.provider(), kFx + "/site-packages/nvidia/nccl/lib/libnccl.so.2");
  const auto ver = RunPass(Record("version", Python("version_not_met.py"),
                                  {"LD_LIBRARY_PATH=" + kFx + "/ver/old"}),
                           analysis::FindMissingSymbols);
  ASSERT_EQ(ver.findings_size(), 1);
  ASSERT_EQ(ver.findings(0).missing_size(), 2);
  EXPECT_EQ(ver.findings(0).missing(0).name(), "");
  EXPECT_EQ(ver.findings(0).missing(0).version(), "VER_2");
  EXPECT_EQ(ver.findings(0).missing(1).name(), "ver_b");
  const auto ok = RunPass(Record("nomissing", Python("torch_then_cupy.py")), analysis::FindMissingSymbols);
  EXPECT_EQ(ok.findings_size(), 0);
  const auto orphan = Record("missinglib", {DLPROBE, "open", kFx + "/lib/libfix_orphan.so"});
  EXPECT_EQ(RunPass(orphan, analysis::FindMissingSymbols).findings_size(), 0)
      << "a library found nowhere is missing_library.cc's";
  const auto lib = RunPass(orphan, analysis::FindMissingLibraries);
  ASSERT_EQ(lib.findings_size(), 1);
  EXPECT_EQ(lib.findings(0).kind(), v1::MISSING_LIBRARY);
  EXPECT_EQ(lib.findings(0).severity(), v1::INFO) << "a dlopen, not the start-up";
}

// When a version node is what the shadowed copy lacks, the shadowing finding names it
// and the copy that offers it (the report keeps only the missing-symbol finding then,
// but the pass on its own must say so too).
TEST(Passes, ShadowingNamesTheMissingVersion) {
  const auto r = RunPass(Record("shadowver", Python("version_not_met.py"),
                                {"LD_LIBRARY_PATH=" + kFx + "/ver/old"}),
                         analysis::FindShadowing);
  ASSERT_EQ(r.findings_size(), 1);
  EXPECT_EQ(r.findings(0).kind(), v1::SEARCH_ORDER_SHADOWING);
  std::string versions;
  for (const auto& d : r.findings(0).details())
    if (d.label() == "version") versions += d.text() + "\n";
  EXPECT_EQ(versions, "libveruser.so needs VER_2 of libver.so.1: " + kFx + "/ver/old/libver.so.1 lacks it, " +
                          kFx + "/ver/new/libver.so.1 offers it\n");
}

// A library loaded lazily whose function nothing defines: a warning, not an error.
TEST(Passes, LazyUnresolvedFunctionIsAWarning) {
  const auto r = RunPass(Record("lazy", {DLPROBE, "lazy", kFx + "/lib/libfix_bad.so"}),
                         analysis::FindMissingSymbols);
  ASSERT_EQ(r.findings_size(), 1);
  EXPECT_EQ(r.findings(0).severity(), v1::WARNING);
  EXPECT_EQ(r.findings(0).missing(0).name(), "fix_missing_symbol");
}

// Why symbols are missing, from the pass alone: each cause with what it rests on; with
// lazy binding, the same cause in the warning.
TEST(Passes, MissingSymbolCauses) {
  auto only = [](const v1::Report& r) -> const v1::MissingSymbol& {
    static const v1::MissingSymbol kNone;
    EXPECT_EQ(r.findings_size(), 1);
    return r.findings_size() == 1 && r.findings(0).missing_size() == 1 ? r.findings(0).missing(0) : kNone;
  };
  const auto abi = RunPass(Record("cause_abi", {DLPROBE, "open", kFx + "/classes/cxxabi/ext/libabiext.so"}),
                           analysis::FindMissingSymbols);
  const auto& a = only(abi);
  EXPECT_EQ(a.name(), "_ZN4host11assert_failERKSs");
  EXPECT_EQ(a.demangled(), "host::assert_fail(std::string const&)");
  EXPECT_EQ(a.cause(), v1::CAUSE_CXX_ABI);
  ASSERT_EQ(a.near_misses_size(), 1);
  EXPECT_EQ(a.near_misses(0).path(), kFx + "/classes/cxxabi/host/libhost.so");
  EXPECT_EQ(a.near_misses(0).name(), "_ZN4host11assert_failERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
  const auto lazy = RunPass(Record("cause_abi_lazy", {DLPROBE, "lazy", kFx + "/classes/cxxabi/ext/libabiext.so"}),
                            analysis::FindMissingSymbols);
  EXPECT_EQ(only(lazy).cause(), v1::CAUSE_CXX_ABI);
  ASSERT_EQ(lazy.findings_size(), 1);
  EXPECT_EQ(lazy.findings(0).severity(), v1::WARNING);
  EXPECT_EQ(lazy.findings(0).fixes(0).action(), v1::FIX_REBUILD_CXX_ABI);
  const auto skew = RunPass(Record("cause_skew", {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py",
                                                  kFx + "/classes/skew/site-packages", "flash_attn_2_cuda"}),
                            analysis::FindMissingSymbols);
  const auto& k = only(skew);
  EXPECT_EQ(k.cause(), v1::CAUSE_HOST_VERSION);
  ASSERT_EQ(k.near_misses_size(), 1);
  EXPECT_EQ(k.near_misses(0).demangled(), "c10::cuda::SetDevice(signed char)");
  const auto py = RunPass(Record("cause_python", {"/usr/bin/python3", SCENARIOS_DIR "/import_from.py",
                                                  kFx + "/classes/cpython/site-packages", "_ymq"}),
                          analysis::FindMissingSymbols);
  const auto& p = only(py);
  EXPECT_EQ(p.cause(), v1::CAUSE_PYTHON_API);
  EXPECT_TRUE(p.interpreter().rfind("/usr/bin/python3", 0) == 0) << p.interpreter();
  EXPECT_FALSE(p.python_version().empty()) << "the Python hook reads it";
  for (std::string how : {"hidden", "script"}) {
    const auto hidden =
        RunPass(Record("cause_" + how, {DLPROBE, "open", kFx + "/classes/notexported/" + how + "/plugin/libcodec.so"}),
                analysis::FindMissingSymbols);
    const auto& h = only(hidden);
    EXPECT_EQ(h.cause(), v1::CAUSE_NOT_EXPORTED) << how;
    EXPECT_EQ(h.local_in(), kFx + "/classes/notexported/" + how + "/lib/libcore.so");
  }
  // Only an old, non-default version: an unversioned reference never binds to it.
  const auto old =
      RunPass(Record("cause_oldver", {DLPROBE, "open", kFx + "/classes/notexported/oldver/plugin/libcodec.so"}),
              analysis::FindMissingSymbols);
  EXPECT_EQ(only(old).cause(), v1::CAUSE_NOT_EXPORTED);
  EXPECT_EQ(only(old).local_in(), kFx + "/classes/notexported/oldver/lib/libcore.so");
  ASSERT_EQ(old.findings_size(), 1);
  std::string why;
  for (const auto& d : old.findings(0).details())
    if (d.label() == "why") why = d.text();
  EXPECT_EQ(why,
            "libcore.so defines core_register_codec only as core_register_codec@CORE_0, a non-default version: "
            "a reference without a version never binds to it");
  ASSERT_GE(old.findings(0).fixes_size(), 1);
  EXPECT_EQ(old.findings(0).fixes(0).action(), v1::FIX_REPLACE_HOST);
  // A C name no object defines in a process without Python: no cause, the pass's usual words.
  const auto plain =
      RunPass(Record("cause_none", {DLPROBE, "open", kFx + "/lib/libfix_bad.so"}), analysis::FindMissingSymbols);
  EXPECT_EQ(only(plain).cause(), v1::MISSING_CAUSE_UNSPECIFIED);
}

// Several symbols that the object a NEEDED was bound to lacks (listed in .dynsym order):
// one verb for them all, and the reuse told as the search that was never done.
TEST(Passes, MissingSymbolsListedInOneSentence) {
  const auto r = RunPass(Record("plural", {DLPROBE, "open", kFx + "/classes/plural/old/libnccl.so.2", "open",
                                           kFx + "/classes/plural/app/libplural.so"}),
                         analysis::FindMissingSymbols);
  ASSERT_EQ(r.findings_size(), 1);
  EXPECT_EQ(r.findings(0).headline(),
            "libplural.so failed to load: ncclCommDeregister and ncclCommRegister are not in the libnccl.so.2 it was "
            "bound to");
  std::string why;
  for (const auto& d : r.findings(0).details())
    if (d.label() == "why") why = d.text();
  EXPECT_EQ(why,
            "glibc reuses a loaded object whose SONAME matches the DT_NEEDED libnccl.so.2 and does not search: "
            "libplural.so's own search was never done");
}

// The pip distribution of a file: the dist-info whose RECORD lists it (a quoted CSV field
// too), its METADATA and WHEEL; none outside site-packages, none for an unlisted file.
TEST(PipOwner, TheDistributionWhoseRecordListsTheFile) {
  const std::string site = testing::ScratchDir("pip_owner") + "/lib/python3/site-packages";
  std::filesystem::create_directories(site + "/torch-2.5.1.dist-info");
  std::filesystem::create_directories(site + "/odd-1.0.dist-info");
  testing::WriteFile(site + "/torch-2.5.1.dist-info/METADATA",
                     "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\nRequires-Dist: filelock\n\n"
                     "Name: not a header\n");
  testing::WriteFile(site + "/torch-2.5.1.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n");
  testing::WriteFile(site + "/torch-2.5.1.dist-info/RECORD", "torch/lib/libc10.so,sha256=x,1\r\ntorch/x.py,,\n");
  testing::WriteFile(site + "/odd-1.0.dist-info/METADATA", "Name: odd\nVersion: 1.0\n");
  testing::WriteFile(site + "/odd-1.0.dist-info/RECORD", "\"weird/a,\"\"b\"\".so\",sha256=x,1\n");
  const auto torch = analysis::PipOwner(site + "/torch/../torch/lib/libc10.so");
  ASSERT_TRUE(torch.has_value());
  EXPECT_EQ(analysis::PipLabel(torch), "torch 2.5.1");
  EXPECT_EQ(torch->dist_info, site + "/torch-2.5.1.dist-info");
  EXPECT_EQ(torch->tags, std::vector<std::string>{"cp311-cp311-linux_x86_64"});
  EXPECT_EQ(torch->requires_dist, std::vector<std::string>{"filelock"});
  const auto odd = analysis::PipOwner(site + "/weird/a,\"b\".so");
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(odd->name, "odd");
  EXPECT_FALSE(analysis::PipOwner(site + "/torch/lib/libtorch.so").has_value());
  EXPECT_FALSE(analysis::PipOwner("/usr/lib/x86_64-linux-gnu/libc.so.6").has_value());
}

// An import-order fix moves whole statements: a load in a block moves with its block.
TEST(PyStatements, MoveAboveMovesWholeStatements) {
  using analysis::StatementMove;
  const auto move = [](const std::vector<std::string>& lines, uint32_t late, uint32_t early) {
    StatementMove m;
    if (!analysis::MoveAbove(lines, late, early, &m)) return std::string("none");
    return fmt::format("{}-{} above {}-{}", m.first, m.last, m.above, m.above_last);
  };
  EXPECT_EQ(move({"import cupy", "import torch"}, 2, 1), "2-2 above 1-1");
  // The body of a `try:` moves with its clauses; trailing blanks and comments stay.
  const std::vector<std::string> in_try = {
      "import ctypes, os, sys", "fx = sys.argv[1]",     "ctypes.CDLL(a)", "try:", "    ctypes.CDLL(b)",
      "    print('ok')",        "except OSError as e:", "    print(e)",   "",     "# end"};
  EXPECT_EQ(move(in_try, 5, 3), "4-8 above 3-3");
  // The earlier load in a block, the later at the top: the later goes above the block.
  EXPECT_EQ(move({"with x:", "    import cupy", "import torch"}, 3, 2), "3-3 above 1-2");
  // Both in one function's body: the lines move within it.
  EXPECT_EQ(move({"def main():", "    import cupy", "    n = 1", "    import torch"}, 4, 2), "4-4 above 2-2");
  // A statement continued by brackets, a backslash or a triple-quoted string is one.
  EXPECT_EQ(move({"import cupy", "x = f(", "1,", ")", "import torch"}, 5, 2), "5-5 above 2-4");
  EXPECT_EQ(move({"import cupy", "s = '''", "import torch", "'''", "import torch"}, 5, 1), "5-5 above 1-1");
  EXPECT_EQ(move({"import a, \\", "  b", "import torch"}, 3, 2), "3-3 above 1-2");
  // No move keeps the script valid: a definition (moving it reorders no call), other
  // blocks of one statement, a line outside the script.
  EXPECT_EQ(move({"import cupy", "def f():", "    import torch"}, 3, 1), "none");
  EXPECT_EQ(move({"if a:", "    import cupy", "else:", "    import torch"}, 4, 2), "none");
  EXPECT_EQ(move({"import cupy"}, 2, 1), "none");
}

}  // namespace
}  // namespace ldscope
