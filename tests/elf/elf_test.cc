// The ELF reader on the fixtures (fields the analysis relies on) and on damaged
// files: truncated, corrupted and absurd inputs give errors or partial results,
// never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "elf/elf_file.h"
#include "elf/facts.h"
#include "loader/ld_cache.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

const elf::Symbol* Find(const elf::ElfInfo& e, const std::string& name) {
  for (const auto& s : e.symbols)
    if (s.name == name) return &s;
  return nullptr;
}

// The facts record a trace carries (elf/facts.h) gives back what the reader read: every
// field, undefined symbols by name with their versions, kept definitions by hash (or by
// name), dropped ones gone, and a damaged record an error, not a crash.
TEST(Elf, FactsRoundTrip) {
  auto read = elf::ReadElf(FIXTURES "/site-packages/torch/lib/libtorch_cuda.so");
  ASSERT_TRUE(read.ok()) << read.error();
  const auto& e = *read;
  auto keep = [](const elf::Symbol& s) {
    return s.name == "torch_cuda_init" ? elf::Keep::kHash : elf::Keep::kDrop;
  };
  const v1::ObjectFacts f = elf::ToFacts(*e, keep, {{"NCCL version ", {}}});
  auto from = elf::FromFacts(f, e->path);
  ASSERT_TRUE(from.ok()) << from.error();
  const auto& back = *from;
  EXPECT_TRUE(back->from_trace);
  EXPECT_EQ(back->soname, e->soname);
  EXPECT_EQ(back->needed, e->needed);
  EXPECT_EQ(back->rpath, e->rpath);
  EXPECT_EQ(back->build_id, e->build_id);
  EXPECT_EQ(back->verdefs, e->verdefs);
  ASSERT_EQ(back->verneeds.size(), e->verneeds.size());
  for (size_t i = 0; i < e->verneeds.size(); ++i) {
    EXPECT_EQ(back->verneeds[i].file, e->verneeds[i].file);
    EXPECT_EQ(back->verneeds[i].versions, e->verneeds[i].versions);
  }
  EXPECT_EQ(back->found, (std::map<std::string, std::vector<std::string>>{{"NCCL version ", {}}}));
  std::vector<const elf::Symbol*> want;
  for (const auto& s : e->symbols)
    if (!s.defined || s.name == "torch_cuda_init") want.push_back(&s);
  ASSERT_EQ(back->symbols.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const elf::Symbol& a = *want[i];
    const elf::Symbol& b = back->symbols[i];
    EXPECT_EQ(b.name, a.defined ? "" : a.name);
    EXPECT_EQ(b.hash, a.hash);
    EXPECT_EQ(b.version, a.version);
    EXPECT_EQ(b.version_file, a.version_file);
    EXPECT_EQ(std::make_tuple(b.defined, b.weak, b.global, b.function, b.unique, b.data, b.hidden),
              std::make_tuple(a.defined, a.weak, a.global, a.function, a.unique, a.data, a.hidden));
  }
  v1::ObjectFacts damaged = f;
  damaged.set_symbols_zlib(f.symbols_zlib().substr(0, f.symbols_zlib().size() / 2));
  const auto bad = elf::FromFacts(damaged, e->path);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("damaged"), std::string::npos) << bad.error();
  const auto unreadable = elf::FromFacts(elf::UnreadableFacts("/x.so", "/x.so: Permission denied"), "/x.so");
  EXPECT_FALSE(unreadable.ok());
  EXPECT_EQ(unreadable.error(), "/x.so: Permission denied");
}

// A trace's records are looked up by path and build-id from their bytes: the fields a
// lookup checks are read, the record decoded whole only when asked (Decode), and gives
// back the very record; later records of a path replace earlier ones.
TEST(Elf, TraceFactsFromBytes) {
  v1::ObjectFacts a;
  a.add_paths("/lib/libx.so.1");
  a.add_paths("/odd/lib\x01x.so");
  a.set_build_id(std::string("\xab\xcd", 2));
  a.set_size(42);
  a.set_mtime_ns(-5);
  a.add_needed("libc.so.6");
  a.set_symbols_zlib("zz");
  v1::ObjectFacts b = elf::UnreadableFacts("/lib/liby.so", "/lib/liby.so: Permission denied");
  elf::TraceFacts facts;
  ASSERT_TRUE(facts.Add(a.SerializeAsString()));
  facts.Add(b);
  EXPECT_FALSE(facts.Add(std::string("\x0a\x05" "ab", 4)));  // a length past the end
  EXPECT_EQ(facts.size(), 2u);
  const elf::FactsRecord* r = facts.ForPath("/lib/libx.so.1");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(facts.ForPath("/odd/lib\\x01x.so"), r);  // by the escaped path, as the model names it
  EXPECT_EQ(facts.ForBuildId(std::string("\xab\xcd", 2)), r);
  EXPECT_EQ(std::make_tuple(r->size, r->mtime_ns, r->unreadable), std::make_tuple(uint64_t{42}, int64_t{-5}, std::string()));
  v1::ObjectFacts whole;
  ASSERT_TRUE(r->Decode(&whole));
  EXPECT_EQ(whole.SerializeAsString(), a.SerializeAsString());
  ASSERT_NE(facts.ForPath("/lib/liby.so"), nullptr);
  EXPECT_EQ(facts.ForPath("/lib/liby.so")->unreadable, "/lib/liby.so: Permission denied");
  a.set_size(43);
  facts.Add(a);
  EXPECT_EQ(facts.ForPath("/lib/libx.so.1")->size, 43u);
}

TEST(Elf, ReadsDynamicSectionAndSymbols) {
  auto read = elf::ReadElf(FIXTURES "/site-packages/torch/lib/libtorch_cuda.so");
  ASSERT_TRUE(read.ok()) << read.error();
  const auto& e = *read;
  EXPECT_EQ(e->soname, "libtorch_cuda.so");
  EXPECT_EQ(e->needed, (std::vector<std::string>{"libnccl.so.2", "libc.so.6"}));
  EXPECT_EQ(e->rpath, "$ORIGIN/../../nvidia/nccl/lib");
  EXPECT_EQ(e->runpath, "");
  EXPECT_EQ(e->build_id.size(), 20u);
  const auto* u = Find(*e, "ncclCommRegister");
  ASSERT_NE(u, nullptr);
  EXPECT_FALSE(u->defined);
  EXPECT_FALSE(u->weak);
  EXPECT_TRUE(u->function);
  const auto* d = Find(*e, "torch_cuda_init");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->defined);
  EXPECT_TRUE(d->global);
}

TEST(Elf, ReadsSymbolVersions) {
  auto lib_read = elf::ReadElf(FIXTURES "/ver/new/libver.so.1");
  ASSERT_TRUE(lib_read.ok()) << lib_read.error();
  const auto& lib = *lib_read;
  EXPECT_EQ(lib->verdefs, (std::vector<std::string>{"VER_1", "VER_2"}));
  ASSERT_NE(Find(*lib, "ver_b"), nullptr);
  EXPECT_EQ(Find(*lib, "ver_b")->version, "VER_2");
  EXPECT_EQ(Find(*lib, "ver_a")->version, "VER_1");
  auto user_read = elf::ReadElf(FIXTURES "/ver/app/libveruser.so");
  ASSERT_TRUE(user_read.ok()) << user_read.error();
  const auto& user = *user_read;
  const auto need = std::find_if(user->verneeds.begin(), user->verneeds.end(),
                                 [](const elf::VersionNeed& v) { return v.file == "libver.so.1"; });
  ASSERT_NE(need, user->verneeds.end());
  EXPECT_EQ(need->versions, (std::vector<std::string>{"VER_2"}));
  const auto* ref = Find(*user, "ver_b");
  ASSERT_NE(ref, nullptr);
  EXPECT_FALSE(ref->defined);
  EXPECT_EQ(ref->version, "VER_2");
  EXPECT_EQ(ref->version_file, "libver.so.1");
}

TEST(Elf, FindsVersionStrings) {
  EXPECT_EQ(elf::FindString(FIXTURES "/system/lib/libnccl.so.2.16.2", "NCCL version "),
            "NCCL version 2.16.2+cuda11.8");
  EXPECT_EQ(elf::FindString(FIXTURES "/lib/libfix_a.so", "NCCL version "), "");
}

TEST(Elf, NotElfAndMissing) {
  const auto hello = elf::ParseElf("hello", "x");
  EXPECT_FALSE(hello.ok());
  EXPECT_NE(hello.error().find("not an ELF file"), std::string::npos);
  const auto missing = elf::ReadElf("/nonexistent/lib.so");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("No such file"), std::string::npos);
  EXPECT_FALSE(elf::ReadElf("/").ok());
}

// Every prefix of a real library, and thousands of corrupted copies: no crash, and
// whatever comes back is bounded by the input.
TEST(Elf, DamagedFilesNeverCrash) {
  const std::string good = testing::ReadFile(FIXTURES "/ver/app/libveruser.so");
  ASSERT_GT(good.size(), 1000u);
  size_t errors = 0;
  for (size_t len = 0; len < good.size(); len += 7) {
    if (!elf::ParseElf(std::string_view(good).substr(0, len), "cut").ok()) ++errors;
  }
  EXPECT_GT(errors, 0u);
  std::mt19937 rng(12345);
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 16);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    const auto e = elf::ParseElf(bad, "fuzz");
    if (e.ok()) {
      EXPECT_LE((*e)->symbols.size(), bad.size());
    }
  }
  // Absurd counts in the headers.
  std::string huge = good;
  huge[0x3c] = '\xff';  // e_shnum
  huge[0x3d] = '\xff';
  const auto h = elf::ParseElf(huge, "huge");
  EXPECT_FALSE(h.ok());
  EXPECT_NE(h.error().find("outside the file"), std::string::npos) << h.error();
}

TEST(LdCache, ReadsTheMachinesCache) {
  loader::LdCache cache;
  const Status loaded = cache.Load("/etc/ld.so.cache");
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  EXPECT_GT(cache.size(), 10u);
  const std::string libc = cache.Lookup("libc.so.6");
  EXPECT_EQ(libc.substr(libc.rfind('/') + 1), "libc.so.6");
  EXPECT_EQ(cache.Lookup("libdoes-not-exist.so.9"), "");
  // Damaged copies: errors, never crashes.
  const std::string data = testing::ReadFile("/etc/ld.so.cache");
  for (size_t len = 0; len < std::min<size_t>(data.size(), 4096); len += 13) {
    loader::LdCache c;
    c.LoadFromMemory(data.substr(0, len)).IgnoreError();  // only: no crash
  }
  loader::LdCache junk;
  EXPECT_EQ(junk.LoadFromMemory("not a cache").error(), "unknown ld.so.cache format");
}

}  // namespace
}  // namespace ldscope
