// The audit library without libc: it needs nothing from any other object (no NEEDED, no
// undefined dynamic symbol: ld.so loads no libc.so.6 into its namespace), and what it
// reads of the process by itself (audit/process.cc: environment, auxiliary vector, clock,
// ld.so's _r_debug and glibc version) is what glibc's own functions say. process.cc is
// compiled into this test program too, whose initialiser ld.so calls with the same
// (argc, argv, envp) as the audit library's.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <sys/auxv.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "elf/elf_file.h"
#include "process.h"

extern char** environ;

namespace ldscope {
namespace {

TEST(AuditLibrary, NeedsNoOtherObject) {
  const auto read = elf::ReadElf(AUDIT_LIB);
  ASSERT_TRUE(read.ok()) << read.error();
  const auto& lib = *read;
  EXPECT_EQ(lib->needed, std::vector<std::string>{});
  std::vector<std::string> undefined, exported;
  lib->ForEachSymbol(elf::ElfInfo::Which::kAll, [&](const elf::Symbol& s) {
    (s.defined ? exported : undefined).emplace_back(s.name);
  });
  EXPECT_EQ(undefined, std::vector<std::string>{});
  std::sort(exported.begin(), exported.end());
  EXPECT_EQ(exported, (std::vector<std::string>{"la_activity", "la_objclose", "la_objopen",
                                                "la_objsearch", "la_preinit", "la_version"}));
}

TEST(Process, EnvironmentAndAuxvAsGlibcSays) {
  ASSERT_NE(audit::proc::Environ(), nullptr);
  EXPECT_EQ(audit::proc::Environ(), environ);  // nothing here called setenv
  for (const char* name : {"PATH", "HOME", "LDSCOPE_NO_SUCH_VARIABLE", "PAT"}) {
    const char* ours = audit::proc::Getenv(name);
    const char* glibc = getenv(name);
    EXPECT_EQ(ours, glibc) << name;
  }
  for (unsigned long type : {AT_PHDR, AT_PHNUM, AT_PAGESZ, AT_BASE, AT_ENTRY, AT_SECURE,
                             AT_SYSINFO_EHDR, AT_RANDOM, AT_EXECFN, AT_UID})
    EXPECT_EQ(audit::proc::Aux(type), getauxval(type)) << "AT_" << type;
  EXPECT_EQ(audit::proc::Aux(1000), 0u);
}

TEST(Process, ClockAsGlibcs) {
  for (clockid_t c : {CLOCK_MONOTONIC, CLOCK_REALTIME}) {
    timespec before{}, ours{}, after{};
    ASSERT_EQ(clock_gettime(c, &before), 0);
    ASSERT_EQ(audit::proc::ClockGettime(c, &ours), 0);
    ASSERT_EQ(clock_gettime(c, &after), 0);
    const auto ns = [](const timespec& t) { return t.tv_sec * 1000000000LL + t.tv_nsec; };
    EXPECT_LE(ns(before), ns(ours)) << c;
    EXPECT_LE(ns(ours), ns(after)) << c;
  }
}

// ld.so's own _r_debug, the one it updates (this program's `&_r_debug` is a copy
// relocation in the executable; the audit namespace, where the library looks, has no
// such copy).
TEST(Process, LoaderAsGlibcSays) {
  const auto& ldso = audit::proc::FindLoader(getauxval(AT_BASE), "/proc/self/exe");
  EXPECT_EQ(std::string(ldso.glibc_version), gnu_get_libc_version());
  ASSERT_NE(ldso.r_debug, nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(ldso.r_debug, &info), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(info.dli_fbase), getauxval(AT_BASE));
  ASSERT_NE(info.dli_sname, nullptr);
  EXPECT_EQ(std::string(info.dli_sname).rfind("_r_debug", 0), 0u) << info.dli_sname;
  const auto* r = static_cast<const r_debug*>(ldso.r_debug);
  EXPECT_EQ(r->r_ldbase, getauxval(AT_BASE));
  EXPECT_EQ(r->r_state, r_debug::RT_CONSISTENT);
}

TEST(Process, VersionFromBanner) {
  char v[32];
  const auto banner = [&](const std::string& text) {
    v[0] = '\0';
    return audit::proc::internal::VersionFromBanner(text.data(), text.size(), v, sizeof v)
               ? std::string(v)
               : std::string("(none)");
  };
  EXPECT_EQ(banner("ld.so (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\nCopyright"),
            "2.36");
  EXPECT_EQ(banner(std::string("\0\0rodata\0", 9) + "ld.so (GNU libc) development release version 2.42.9000.\n"),
            "2.42.9000");
  EXPECT_EQ(banner("release version 2.41"), "2.41");  // at the very end
  EXPECT_EQ(banner("release version "), "(none)");
  EXPECT_EQ(banner("release version x.y"), "(none)");
  EXPECT_EQ(banner("elease version 2.36."), "(none)");
  EXPECT_EQ(banner(""), "(none)");
  // Longer than the output: cut, never overrun.
  char small[5];
  const std::string t = "release version 2.36.1234";
  ASSERT_TRUE(audit::proc::internal::VersionFromBanner(t.data(), t.size(), small, sizeof small));
  EXPECT_EQ(std::string(small), "2.36");
}

TEST(Process, VersionFromFileName) {
  char v[32];
  const auto name = [&](const char* n) {
    return audit::proc::internal::VersionFromFileName(n, v, sizeof v) ? std::string(v)
                                                                      : std::string("(none)");
  };
  EXPECT_EQ(name("ld-2.31.so"), "2.31");
  EXPECT_EQ(name("ld-2.28.so"), "2.28");
  EXPECT_EQ(name("ld-linux-x86-64.so.2"), "(none)");
  EXPECT_EQ(name("ld-linux-aarch64.so.1"), "(none)");
  EXPECT_EQ(name("ld-2.31.so.bak"), "(none)");
  EXPECT_EQ(name("ld-.so"), "(none)");
  EXPECT_EQ(name("libc-2.31.so"), "(none)");
}

}  // namespace
}  // namespace ldscope
