// The ELF reader on the fixtures (fields the analysis relies on) and on damaged
// files: truncated, corrupted and absurd inputs give errors or partial results,
// never a crash.
#include <gtest/gtest.h>

#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>

#include "elf/demangle.h"
#include "elf/elf_file.h"
#include "elf/symtab.h"
#include "elf/facts.h"
#include "loader/ld_cache.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

// The symbol of that name, by a scan of the symbol table (not the hash table).
std::optional<elf::Symbol> Find(const elf::ElfInfo& e, const std::string& name) {
  std::optional<elf::Symbol> out;
  e.ForEachSymbol(elf::ElfInfo::Which::kAll, [&](const elf::Symbol& s) {
    if (!out && s.name == name) out = s;
  });
  return out;
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
  std::vector<elf::Symbol> want;
  for (const auto& s : e->Symbols(elf::ElfInfo::Which::kAll))
    if (!s.defined || s.name == "torch_cuda_init") want.push_back(s);
  const std::vector<elf::Symbol> got = back->Symbols(elf::ElfInfo::Which::kAll);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const elf::Symbol& a = want[i];
    const elf::Symbol& b = got[i];
    EXPECT_EQ(b.name, a.defined ? "" : a.name);
    EXPECT_EQ(elf::HashOf(b), elf::HashOf(a));
    EXPECT_EQ(b.version, a.version);
    EXPECT_EQ(b.version_file, a.version_file);
    EXPECT_EQ(std::make_tuple(b.defined, b.weak, b.unique, b.data, b.hidden),
              std::make_tuple(a.defined, a.weak, a.unique, a.data, a.hidden));
  }
  // Lookups answer from the kept definitions' hashes, as from the file.
  EXPECT_TRUE(back->Defines("torch_cuda_init", ""));
  EXPECT_TRUE(e->Defines("torch_cuda_init", ""));
  EXPECT_FALSE(back->Find(elf::SymbolQuery("ncclCommRegister", "")).named);
  v1::ObjectFacts damaged = f;
  damaged.set_symbols_zlib(f.symbols_zlib().substr(0, f.symbols_zlib().size() / 2));
  const auto bad = elf::FromFacts(damaged, e->path);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("damaged"), std::string::npos) << bad.error();
  const auto unreadable = elf::FromFacts(elf::UnreadableFacts("/x.so", "/x.so: Permission denied"), "/x.so");
  EXPECT_FALSE(unreadable.ok());
  EXPECT_EQ(unreadable.error(), "/x.so: Permission denied");
}

// PT_TLS, DT_FLAGS and PT_GNU_STACK, as ld.so reads them (the static TLS and executable
// stack passes), from the file and back from the facts record a trace carries.
TEST(Elf, ReadsTlsAndStackFlags) {
  struct Want {
    std::string path;
    uint64_t tls_size;
    bool static_tls;
    uint32_t stack_flags;
  };
  for (const Want& w : {Want{FIXTURES "/classes/loadcheck/initial-exec/libtls_big.so", 1800, true, PF_R | PF_W},
                        Want{FIXTURES "/classes/loadcheck/execstack/libexecstack.so", 0, false, PF_R | PF_W | PF_X},
                        Want{FIXTURES "/lib/libfix_b.so", 0, false, PF_R | PF_W}}) {
    auto read = elf::ReadElf(w.path);
    ASSERT_TRUE(read.ok()) << read.error();
    const auto& e = *read;
    auto from = elf::FromFacts(elf::ToFacts(*e, [](const elf::Symbol&) { return elf::Keep::kDrop; }, {}), e->path);
    ASSERT_TRUE(from.ok()) << from.error();
    for (const elf::ElfInfo* x : {e.get(), from->get()}) {
      EXPECT_EQ(x->tls_size, w.tls_size) << w.path;
      EXPECT_EQ(x->tls_align, w.tls_size > 0 ? 16u : 0u) << w.path;
      EXPECT_EQ(x->tls_first_byte, 0u) << w.path;
      EXPECT_EQ((x->dt_flags & DF_STATIC_TLS) != 0, w.static_tls) << w.path;
      EXPECT_TRUE(x->gnu_stack) << w.path;
      EXPECT_EQ(x->stack_flags, w.stack_flags) << w.path;
    }
  }
  // No PT_GNU_STACK at all: recorded as absent, not as flags 0.
  v1::ObjectFacts f;
  f.add_paths("/x.so");
  auto none = elf::FromFacts(f, "/x.so");
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_FALSE((*none)->gnu_stack);
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
  a.set_machine(62);
  v1::ObjectFacts b = elf::UnreadableFacts("/lib/liby.so", "/lib/liby.so: Permission denied");
  elf::TraceFacts facts;
  ASSERT_TRUE(facts.Add(a.SerializeAsString()));
  facts.Add(b);
  EXPECT_FALSE(facts.Add(std::string("\x0a\x05" "ab", 4)));  // a length past the end
  EXPECT_EQ(facts.size(), 2u);
  const elf::FactsRecord* r = facts.ForPath("/lib/libx.so.1");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(facts.ForPath("/odd/lib\x01x.so"), r);  // by the path's bytes, as the model names it
  EXPECT_EQ(facts.ForBuildId(std::string("\xab\xcd", 2)), r);
  EXPECT_EQ(std::make_tuple(r->size, r->mtime_ns, r->unreadable, r->machine),
            std::make_tuple(uint64_t{42}, int64_t{-5}, std::string(), uint32_t{62}));
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
  const auto u = Find(*e, "ncclCommRegister");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->defined);
  EXPECT_FALSE(u->weak);
  const auto d = Find(*e, "torch_cuda_init");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->defined);
  EXPECT_FALSE(d->weak);
}

TEST(Elf, ReadsSymbolVersions) {
  auto lib_read = elf::ReadElf(FIXTURES "/ver/new/libver.so.1");
  ASSERT_TRUE(lib_read.ok()) << lib_read.error();
  const auto& lib = *lib_read;
  EXPECT_EQ(lib->verdefs, (std::vector<std::string>{"VER_1", "VER_2"}));
  ASSERT_TRUE(Find(*lib, "ver_b"));
  EXPECT_EQ(Find(*lib, "ver_b")->version, "VER_2");
  EXPECT_EQ(Find(*lib, "ver_a")->version, "VER_1");
  auto user_read = elf::ReadElf(FIXTURES "/ver/app/libveruser.so");
  ASSERT_TRUE(user_read.ok()) << user_read.error();
  const auto& user = *user_read;
  const auto need = std::find_if(user->verneeds.begin(), user->verneeds.end(),
                                 [](const elf::VersionNeed& v) { return v.file == "libver.so.1"; });
  ASSERT_NE(need, user->verneeds.end());
  EXPECT_EQ(need->versions, (std::vector<std::string>{"VER_2"}));
  const auto ref = Find(*user, "ver_b");
  ASSERT_TRUE(ref);
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
      size_t n = 0;
      (*e)->ForEachSymbol(elf::ElfInfo::Which::kAll, [&](const elf::Symbol&) { ++n; });
      EXPECT_LE(n, bad.size());
      // Lookups walk the (possibly damaged) hash table: bounded, never a crash.
      (*e)->Find(elf::SymbolQuery("ver_user", ""));
      (*e)->Find(elf::SymbolQuery("ver_b", "VER_2"));
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

// The library's symbol table in the lookup's terms, with the hash table it has (DT_GNU_HASH,
// DT_HASH, or none: a scan).
void ExpectLookups(const elf::ElfInfo& e) {
  SCOPED_TRACE(e.path);
  auto find = [&](const char* name, const char* version) { return e.Find(elf::SymbolQuery(name, version)); };
  // Present, by default version: an unversioned reference or its version matches, another does not.
  EXPECT_TRUE(find("lk_plain", "").named);
  EXPECT_TRUE(find("lk_plain", "").matches);
  EXPECT_TRUE(find("lk_plain", "LK_1").matches);
  EXPECT_TRUE(find("lk_plain", "LK_2").named);
  EXPECT_FALSE(find("lk_plain", "LK_2").matches);
  EXPECT_EQ(find("lk_plain", "").first.version, "LK_1");
  // One name in two versions: each matches its own reference; the default one comes first.
  EXPECT_TRUE(find("lk_twice", "").matches);
  EXPECT_TRUE(find("lk_twice", "LK_1").matches);
  EXPECT_TRUE(find("lk_twice", "LK_2").matches);
  EXPECT_FALSE(find("lk_twice", "LK_3").matches);
  // Only a non-default (hidden) version: a versioned reference finds it, an unversioned one does not.
  EXPECT_TRUE(find("lk_oldonly", "LK_1").matches);
  EXPECT_TRUE(find("lk_oldonly", "").named);
  EXPECT_FALSE(find("lk_oldonly", "").matches);
  EXPECT_TRUE(find("lk_oldonly", "").first.hidden);
  // Kinds of definition DefOf-style checks read.
  EXPECT_TRUE(find("lk_weak", "").first.weak);
  EXPECT_FALSE(find("lk_plain", "").first.weak);
  EXPECT_TRUE(find("lk_data", "").first.data);
  EXPECT_FALSE(find("lk_plain", "").first.data);
  // Absent: never defined, only referenced, hidden visibility, made local by the script.
  for (const char* absent : {"lk_absent", "lk_undefined", "lk_hidden", "lk_scripted_local", "lk_twice_old", ""})
    EXPECT_FALSE(find(absent, "").named) << absent;
  const auto u = Find(e, "lk_undefined");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->defined);
  // Every definition the table lists is found through the hash table, and first.
  e.ForEachSymbol(elf::ElfInfo::Which::kDefined, [&](const elf::Symbol& s) {
    const elf::Lookup l = e.Find(elf::SymbolQuery(s.name, s.version));
    EXPECT_TRUE(l.named && l.matches) << s.name << "@" << s.version;
  });
}

// The same bytes with the hash sections' types blanked: no table, a scan stands in.
std::string WithoutHashTables(std::string bytes) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    const size_t off = eh.e_shoff + i * sizeof sh;
    std::memcpy(&sh, bytes.data() + off, sizeof sh);
    if (sh.sh_type == SHT_GNU_HASH || sh.sh_type == SHT_HASH) {
      sh.sh_type = SHT_PROGBITS;
      std::memcpy(bytes.data() + off, &sh, sizeof sh);
    }
  }
  return bytes;
}

// Looking a definition up the way ld.so's do_lookup does: the object's own DT_GNU_HASH
// table (bloom filter, bucket, chain), DT_HASH where that is all it has, a scan where it
// has neither; all three give one answer, with glibc's version rule.
TEST(Elf, LooksDefinitionsUpThroughTheHashTable) {
  for (const char* style : {"gnu", "sysv", "both"}) {
    auto e = elf::ReadElf(std::string(FIXTURES "/lookup/") + style + "/liblookup.so");
    ASSERT_TRUE(e.ok()) << e.error();
    ExpectLookups(**e);
    auto scanned = elf::ParseElf(WithoutHashTables(testing::ReadFile((*e)->path)), (*e)->path + " (no hash table)");
    ASSERT_TRUE(scanned.ok()) << scanned.error();
    ExpectLookups(**scanned);
  }
  // A versioned reference matches any definition of an object without version definitions.
  auto plain = elf::ReadElf(FIXTURES "/lib/libfix_b.so");
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_TRUE((*plain)->Defines("fix_b", "SOME_1"));
  EXPECT_FALSE((*plain)->Defines("fix_a", ""));
}

// Every fixture library and the C library (hidden versions, IFUNCs, thousands of
// symbols): each definition a scan of .dynsym lists is the one the hash table finds first.
TEST(Elf, HashLookupsAgreeWithAScan) {
  std::vector<std::string> paths = {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"};
  for (const auto& f : std::filesystem::recursive_directory_iterator(FIXTURES))
    if (f.is_regular_file() && f.path().string().find(".so") != std::string::npos) paths.push_back(f.path());
  size_t checked = 0;
  for (const auto& p : paths) {
    auto read = elf::ReadElf(p);
    if (!read.ok()) continue;
    const auto& e = *read;
    std::map<std::string, elf::Symbol> first;  // by name: the first definition in .dynsym
    e->ForEachSymbol(elf::ElfInfo::Which::kDefined, [&](const elf::Symbol& s) {
      first.try_emplace(std::string(s.name), s);
    });
    for (const auto& [name, s] : first) {
      const elf::Lookup l = e->Find(elf::SymbolQuery(name, ""));
      ASSERT_TRUE(l.named) << p << ": " << name;
      EXPECT_EQ(std::make_tuple(l.first.version, l.first.hidden, l.first.weak, l.first.data),
                std::make_tuple(s.version, s.hidden, s.weak, s.data)) << p << ": " << name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000u);
}

// C++ names for the missing-symbol causes: demangled, compared without parameters, and
// in the old library ABI's spelling.
TEST(Demangle, NamesAndTheirParts) {
  EXPECT_EQ(elf::Demangle("_ZN3c104cuda9SetDeviceEi"), "c10::cuda::SetDevice(int)");
  EXPECT_EQ(elf::Demangle("ncclCommRegister"), "");
  EXPECT_EQ(elf::Demangle("_ZN3c10"), "");  // cut short
  EXPECT_EQ(elf::Demangle("_ZN" + std::string(elf::kMaxMangled, '9')), "");
  EXPECT_EQ(elf::WithoutParameters("c10::cuda::SetDevice(int)"), "c10::cuda::SetDevice");
  EXPECT_EQ(elf::WithoutParameters("host::Bar::get() const &"), "host::Bar::get");
  EXPECT_EQ(elf::WithoutParameters("int host::tf<int>(int)"), "host::tf<int>");
  EXPECT_EQ(elf::WithoutParameters("host::name[abi:cxx11]()"), "host::name");
  EXPECT_EQ(elf::WithoutParameters("(anonymous namespace)::f(void (*)(int), char)"), "(anonymous namespace)::f");
  EXPECT_EQ(elf::WithoutParameters("c10::flag"), "c10::flag");
  // host::assert_fail(std::string const&) as the two ABIs mangle it.
  const std::string old_abi = elf::Demangle("_ZN4host11assert_failERKSs");
  const std::string new_abi =
      elf::Demangle("_ZN4host11assert_failERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
  EXPECT_EQ(old_abi, "host::assert_fail(std::string const&)");
  EXPECT_NE(old_abi, new_abi);
  EXPECT_EQ(elf::OldAbiSpelling(new_abi), old_abi);
  EXPECT_EQ(elf::WithoutParameters(old_abi), elf::WithoutParameters(new_abi));
  EXPECT_TRUE(elf::UsesCxx11Abi(new_abi));
  EXPECT_FALSE(elf::UsesCxx11Abi(old_abi));
  EXPECT_EQ(elf::OldAbiSpelling(elf::Demangle("_ZN4host4nameB5cxx11Ev")), elf::Demangle("_ZN4host4nameEv"));
  EXPECT_NE(elf::OldAbiSpelling(elf::Demangle("_ZN3c104cuda9SetDeviceEa")), "c10::cuda::SetDevice(int)");
  EXPECT_EQ(elf::LastSourceName("c10::cuda::SetDevice"), "9SetDevice");
  EXPECT_EQ(elf::LastSourceName("host::Bar::~Bar"), "3Bar");
  EXPECT_EQ(elf::LastSourceName("host::tf<int>"), "2tf");
  EXPECT_EQ(elf::LastSourceName("host::operator+"), "");
  std::vector<std::string_view> tokens;
  elf::SourceNameCandidates("_ZN3c104cuda9SetDeviceEa", &tokens);
  for (std::string_view t : {"3c10", "4cuda", "9SetDevice"})
    EXPECT_NE(std::find(tokens.begin(), tokens.end(), t), tokens.end()) << t;
  elf::SourceNameCandidates("_Z99", &tokens);  // a length past the end
  EXPECT_TRUE(tokens.empty());
}

// .symtab's local definitions, with why each is local; a stripped copy has none to say.
TEST(Symtab, FindsLocalDefinitionsAndWhyTheyAreLocal) {
  const std::string lib = FIXTURES "/elf/locals/liblocals.so";
  const std::vector<std::string> names = {"locals_static", "locals_hidden", "locals_scripted", "locals_public",
                                          "absent"};
  auto r = elf::FindLocalDefinitions(lib, names);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->has_symtab);
  std::map<std::string, elf::LocalDefinition> by_name;
  for (const auto& d : r->found) by_name[d.name] = d;
  ASSERT_EQ(by_name.size(), 3u);  // locals_public is global, absent is absent
  EXPECT_EQ(by_name["locals_static"].kind, elf::LocalKind::kFileLocal);
  EXPECT_EQ(by_name["locals_static"].source, "locals.c");
  EXPECT_EQ(by_name["locals_scripted"].kind, elf::LocalKind::kLinkLocal);
  // GNU ld leaves no trace of the hidden visibility in the output; a linker that keeps it
  // says kHidden. Either way, not a static function.
  EXPECT_NE(by_name["locals_hidden"].kind, elf::LocalKind::kFileLocal);
  auto stripped = elf::FindLocalDefinitions(FIXTURES "/elf/locals/liblocals-stripped.so", names);
  ASSERT_TRUE(stripped.ok()) << stripped.error();
  EXPECT_FALSE(stripped->has_symtab);
  EXPECT_TRUE(stripped->found.empty());
  EXPECT_FALSE(elf::FindLocalDefinitions(FIXTURES "/elf/locals/absent.so", names).ok());
  struct stat st {};
  ASSERT_EQ(stat(lib.c_str(), &st), 0);
  EXPECT_TRUE(elf::FindLocalDefinitions(lib, names, st.st_dev, st.st_ino).ok());
  EXPECT_FALSE(elf::FindLocalDefinitions(lib, names, st.st_dev, st.st_ino + 1).ok());  // another file
  // Every prefix and a few corruptions of it: an error or an answer, never a crash.
  const std::string bytes = testing::ReadFile(lib);
  const auto dir = testing::ScratchDir("symtab_damaged");
  std::mt19937 rng(7);
  for (size_t cut : {size_t{0}, size_t{16}, size_t{64}, bytes.size() / 2, bytes.size() - 1}) {
    testing::WriteFile(dir + "/cut.so", bytes.substr(0, cut));
    elf::FindLocalDefinitions(dir + "/cut.so", names).IgnoreError();  // that it returns is the test
  }
  for (int i = 0; i < 200; ++i) {
    std::string b = bytes;
    for (int k = 0; k < 8; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    testing::WriteFile(dir + "/bad.so", b);
    elf::FindLocalDefinitions(dir + "/bad.so", names).IgnoreError();  // that it returns is the test
  }
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
