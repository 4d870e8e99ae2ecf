// What the audit library reads from the traced process's own memory: an object's
// dynamic section and build-id exactly as the ELF reader finds them on disk, and which
// pages are writable (the roll-back check), by PROCMAP_QUERY and by /proc/self/maps'
// text alike.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "elf/elf_file.h"
#include "objinfo.h"

namespace ldscope {
namespace {

const std::string kLibA = FIXTURES "/lib/libfix_a.so";

int g_writable_global = 1;
const char kReadOnly[] = "a constant in .rodata";

audit::ProcessAux Aux() {
  audit::ProcessAux aux;
  aux.vdso_ehdr = getauxval(AT_SYSINFO_EHDR);
  aux.ldso_base = getauxval(AT_BASE);
  aux.main_phdr = getauxval(AT_PHDR);
  aux.main_phnum = getauxval(AT_PHNUM);
  aux.page_size = static_cast<uintptr_t>(getpagesize());
  return aux;
}

void ExpectSameAsOnDisk(const link_map* map, const std::string& path) {
  auto o = std::make_unique<audit::ObjectInfo>();
  audit::ReadMappedObject(map, false, Aux(), o.get());
  const auto read = elf::ReadElf(path);
  ASSERT_TRUE(read.ok()) << read.error();
  const auto& disk = *read;
  EXPECT_EQ(o->soname ? o->soname : "", disk->soname) << path;
  std::vector<std::string> needed(o->needed, o->needed + o->n_needed);
  EXPECT_EQ(needed, disk->needed) << path;
  EXPECT_EQ(o->rpath ? o->rpath : "", disk->rpath) << path;
  EXPECT_EQ(o->runpath ? o->runpath : "", disk->runpath) << path;
  EXPECT_EQ(o->flags_1, disk->flags_1) << path;
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(o->build_id), o->build_id_len), disk->build_id)
      << path;
  EXPECT_FALSE(disk->build_id.empty()) << path;
}

TEST(ObjInfo, DynamicSectionAndBuildIdAsOnDisk) {
  void* h = dlopen(kLibA.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  link_map* map = nullptr;
  ASSERT_EQ(dlinfo(h, RTLD_DI_LINKMAP, &map), 0);
  ExpectSameAsOnDisk(map, kLibA);
  // Every object of this process with a file behind it: libc, libstdc++, libprotobuf...
  int checked = 0;
  link_map* head = map;
  while (head->l_prev != nullptr) head = head->l_prev;
  for (link_map* m = head; m != nullptr; m = m->l_next) {
    if (m->l_name == nullptr || m->l_name[0] != '/') continue;
    ExpectSameAsOnDisk(m, m->l_name);
    ++checked;
  }
  EXPECT_GE(checked, 5) << "libfix_a, libfix_b, libc, ld.so, libstdc++...";
  dlclose(h);
}

TEST(ObjInfo, WritablePagesByQueryAndByMapsAgree) {
  const long page = getpagesize();
  void* rw = mmap(nullptr, static_cast<size_t>(page) * 2, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(rw, MAP_FAILED);
  void* ro = static_cast<char*>(rw) + page;
  ASSERT_EQ(mprotect(ro, static_cast<size_t>(page), PROT_READ), 0);
  void* gone = mmap(nullptr, static_cast<size_t>(page), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  munmap(gone, static_cast<size_t>(page));
  int on_stack = 0;
  const std::vector<uintptr_t> addrs = {
      reinterpret_cast<uintptr_t>(rw),  reinterpret_cast<uintptr_t>(ro),
      reinterpret_cast<uintptr_t>(gone), reinterpret_cast<uintptr_t>(&on_stack),
      reinterpret_cast<uintptr_t>(&g_writable_global), reinterpret_cast<uintptr_t>(kReadOnly),
      reinterpret_cast<uintptr_t>(&ExpectSameAsOnDisk)};
  const std::vector<bool> expected = {true, false, false, true, true, false, false};
  bool by_maps[7], by_query[7], combined[7];
  audit::PagesWritableByMaps(addrs.data(), by_maps, addrs.size());
  audit::PagesWritable(addrs.data(), combined, addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    EXPECT_EQ(by_maps[i], expected[i]) << "address " << i;
    EXPECT_EQ(combined[i], expected[i]) << "address " << i;
  }
  if (audit::PagesWritableByQuery(addrs.data(), by_query, addrs.size())) {
    for (size_t i = 0; i < addrs.size(); ++i) EXPECT_EQ(by_query[i], expected[i]) << "address " << i;
  } else {
    std::printf("PROCMAP_QUERY not available on this kernel: only the text was checked\n");
  }
  munmap(rw, static_cast<size_t>(page) * 2);
}

}  // namespace
}  // namespace ldscope
