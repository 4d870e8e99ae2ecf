// The link maps of a running process (snapshot.h): r_debug, the namespaces' lists, and
// each object's dynamic section and build-id, all read from the target's memory.
#include <elf.h>
#include <link.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "snapshot/internal.h"
#include "snapshot/memory.h"
#include "snapshot/snapshot.h"

namespace ldscope::snapshot {
namespace {

// The public part of glibc's struct link_map (link.h), in the target's layout (the
// reader's own: 64-bit, as checked before).
struct RawLinkMap {
  uint64_t l_addr, l_name, l_ld, l_next, l_prev;
};
// struct r_debug_extended: r_debug, then r_next (glibc 2.35, r_version 2).
struct RawRDebug {
  int32_t r_version;
  int32_t pad0;
  uint64_t r_map, r_brk;
  int32_t r_state;
  int32_t pad1;
  uint64_t r_ldbase, r_next;
};
static_assert(sizeof(RawRDebug) == 48);
constexpr int32_t kRtConsistent = 0;  // r_debug.r_state: RT_CONSISTENT

uint64_t Mono() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

// A dynamic section's entries, read at addr up to DT_NULL (at most kMaxDynamic, and not
// past the end of the mapping that holds it).
bool ReadDynamic(Memory& mem, const std::vector<Mapping>& maps, uint64_t addr, std::vector<Elf64_Dyn>* out) {
  out->clear();
  const Mapping* m = MappingAt(maps, addr);
  if (m == nullptr) return false;
  const size_t room = static_cast<size_t>((m->end - addr) / sizeof(Elf64_Dyn));
  const size_t n = std::min(room, kMaxDynamic);
  out->resize(n);
  if (n == 0 || !mem.Read(addr, out->data(), n * sizeof(Elf64_Dyn))) return false;
  for (size_t i = 0; i < n; ++i)
    if ((*out)[i].d_tag == DT_NULL) {
      out->resize(i);
      return true;
    }
  return true;  // no DT_NULL within the bound: what was read is kept
}

// An address a dynamic entry holds: ld.so relocates DT_STRTAB and friends in a writable
// dynamic section; a read-only one (the vDSO's) keeps the link-time value, l_addr away.
uint64_t DynAddr(const std::vector<Mapping>& maps, uint64_t value, uint64_t l_addr, uint64_t dev, uint64_t ino) {
  const Mapping* m = MappingAt(maps, value);
  if (m != nullptr && m->dev == dev && m->ino == ino) return value;
  return value + l_addr;
}

// The object's soname, NEEDED, RPATH, RUNPATH and DT_FLAGS_1 from its dynamic section.
void ReadDynamicFacts(Memory& mem, const std::vector<Mapping>& maps, Object* o) {
  std::vector<Elf64_Dyn> dyn;
  if (!ReadDynamic(mem, maps, o->l_ld, &dyn)) return;
  uint64_t strtab = 0, strsz = 0;
  int64_t soname = -1, rpath = -1, runpath = -1;
  std::vector<uint64_t> needed;
  for (const auto& d : dyn) {
    switch (d.d_tag) {
      case DT_STRTAB: strtab = d.d_un.d_ptr; break;
      case DT_STRSZ: strsz = d.d_un.d_val; break;
      case DT_SONAME: soname = static_cast<int64_t>(d.d_un.d_val); break;
      case DT_RPATH: rpath = static_cast<int64_t>(d.d_un.d_val); break;
      case DT_RUNPATH: runpath = static_cast<int64_t>(d.d_un.d_val); break;
      case DT_FLAGS_1: o->flags_1 = d.d_un.d_val; break;
      case DT_NEEDED:
        if (needed.size() < kMaxNeeded) needed.push_back(d.d_un.d_val);
        break;
      default: break;
    }
  }
  if (strtab == 0) return;
  strtab = DynAddr(maps, strtab, o->l_addr, o->dev, o->ino);
  // Each string is read as a piece of at most 256 bytes, all in one call, and longer
  // ones again in full; none past DT_STRSZ or the mapping.
  const Mapping* m = MappingAt(maps, strtab);
  if (m == nullptr) return;
  const uint64_t limit = std::min(m->end, strsz != 0 ? strtab + strsz : m->end);
  std::vector<uint64_t> offs;
  if (soname >= 0) offs.push_back(static_cast<uint64_t>(soname));
  if (rpath >= 0) offs.push_back(static_cast<uint64_t>(rpath));
  if (runpath >= 0) offs.push_back(static_cast<uint64_t>(runpath));
  offs.insert(offs.end(), needed.begin(), needed.end());
  std::vector<std::pair<uint64_t, size_t>> pieces;
  for (uint64_t off : offs) {
    const uint64_t at = strtab + off;
    if (at < strtab || at >= limit) {
      pieces.push_back({strtab, 0});
      continue;
    }
    pieces.push_back({at, static_cast<size_t>(std::min<uint64_t>(256, limit - at))});
  }
  std::vector<std::string> got;
  if (!mem.ReadMany(pieces, &got)) return;
  std::vector<std::string> text(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const size_t nul = got[i].find('\0');
    if (nul != std::string::npos) {
      text[i] = got[i].substr(0, nul);
    } else if (pieces[i].second > 0) {
      std::string s;
      mem.ReadString(pieces[i].first, std::min<uint64_t>(kMaxString, limit - pieces[i].first), &s);
      text[i] = s;
    }
  }
  size_t i = 0;
  if (soname >= 0) o->soname = text[i++];
  if (rpath >= 0) o->rpath = text[i++];
  if (runpath >= 0) o->runpath = text[i++];
  for (; i < text.size(); ++i) o->needed.push_back(text[i]);
}

// NT_GNU_BUILD_ID from the object's mapped program headers: its ELF header is at the
// start of the mapping of the same file at offset 0 (the vDSO's at its own start).
void ReadBuildId(Memory& mem, const std::vector<Mapping>& maps, Object* o) {
  const Mapping* header = nullptr;
  const Mapping* dyn_map = MappingAt(maps, o->l_ld);
  if (dyn_map == nullptr) return;
  if (o->is_vdso) {
    header = dyn_map;
  } else {
    for (const auto& m : maps)
      if (m.dev == o->dev && m.ino == o->ino && m.offset == 0 && m.start <= o->l_ld) header = &m;
  }
  if (header == nullptr) return;
  Elf64_Ehdr eh;
  if (!mem.ReadValue(header->start, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > kMaxPhdrs)
    return;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!mem.Read(header->start + eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr))) return;
  for (const auto& p : ph) {
    if (p.p_type != PT_NOTE || p.p_memsz > 65536) continue;
    std::string note(p.p_memsz, '\0');
    if (!mem.Read(o->l_addr + p.p_vaddr, note.data(), note.size())) continue;
    size_t at = 0;
    while (at + sizeof(Elf64_Nhdr) <= note.size()) {
      Elf64_Nhdr nh;
      std::memcpy(&nh, note.data() + at, sizeof nh);
      const size_t name_at = at + sizeof nh;
      const size_t desc_at = name_at + ((nh.n_namesz + 3u) & ~3u);
      const size_t next = desc_at + ((nh.n_descsz + 3u) & ~3u);
      if (nh.n_namesz > note.size() || nh.n_descsz > note.size() || next > note.size() || next <= at) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(note.data() + name_at, "GNU", 4) == 0) {
        o->build_id.assign(note.data() + desc_at, nh.n_descsz);
        return;
      }
      at = next;
    }
  }
}

// One namespace's list, from head: each link_map's public fields, l_prev checked
// against the walk, cycles and length bounded.
Status WalkList(Memory& mem, uint64_t head, int64_t lmid, std::vector<Object>* out) {
  std::unordered_set<uint64_t> seen;
  uint64_t prev = 0;
  for (uint64_t at = head; at != 0;) {
    if (seen.size() >= kMaxObjects) return Error{fmt::format("namespace {} lists more than {} objects", lmid, kMaxObjects)};
    if (!seen.insert(at).second) return Error{fmt::format("namespace {}'s list loops back to an object it listed", lmid)};
    RawLinkMap lm;
    if (!mem.ReadValue(at, &lm))
      return Error{fmt::format("cannot read a link_map of namespace {} at {:#x}: {}", lmid, at, std::strerror(mem.last_errno()))};
    if (lm.l_prev != prev) return Error{fmt::format("namespace {}'s list is not linked both ways at {:#x}", lmid, at)};
    Object o;
    o.lmid = lmid;
    o.map = at;
    o.l_addr = lm.l_addr;
    o.l_ld = lm.l_ld;
    if (lm.l_name != 0) mem.ReadString(lm.l_name, kMaxString, &o.name);
    out->push_back(std::move(o));
    prev = at;
    at = lm.l_next;
  }
  return Status::Ok();
}

// The namespaces' r_debug structures: the first, then r_next (r_version >= 2).
Status ReadDebugChain(Memory& mem, uint64_t r_debug, std::vector<RawRDebug>* out) {
  out->clear();
  std::set<uint64_t> seen;
  for (uint64_t at = r_debug; at != 0;) {
    if (out->size() >= kMaxNamespaces) return Error{fmt::format("more than {} namespaces chained from r_debug", kMaxNamespaces)};
    if (!seen.insert(at).second) return Error{"the namespaces' r_debug chain loops"};
    RawRDebug r{};
    // The first is a whole r_debug_extended only from r_version 2 on.
    const size_t size = out->empty() ? offsetof(RawRDebug, r_next) : sizeof r;
    if (!mem.Read(at, &r, size)) return Error{fmt::format("cannot read r_debug at {:#x}: {}", at, std::strerror(mem.last_errno()))};
    if (out->empty() && r.r_version >= 2 && !mem.ReadValue(at + offsetof(RawRDebug, r_next), &r.r_next))
      return Error{fmt::format("cannot read r_debug_extended at {:#x}", at)};
    out->push_back(r);
    if (r.r_version < 2) break;
    at = r.r_next;
  }
  return Status::Ok();
}

// What makes two reads the same list: each object's link_map and name pointer.
std::vector<std::pair<uint64_t, uint64_t>> Shape(const std::vector<Object>& objs) {
  std::vector<std::pair<uint64_t, uint64_t>> s;
  s.reserve(objs.size());
  for (const auto& o : objs) s.push_back({o.map, o.l_ld});
  return s;
}

}  // namespace

Status ReadLinkMaps(Memory& mem, const std::vector<Mapping>& maps, const Auxv& aux, uint64_t r_debug, Process* p) {
  const uint64_t deadline = Mono() + static_cast<uint64_t>(kRetryMs) * 1000000ull;
  std::string last_why;
  for (int attempt = 1; attempt <= kMaxTries; ++attempt) {
    p->tries = attempt;
    if (attempt > 1) {
      if (Mono() > deadline) break;
      usleep(static_cast<useconds_t>(std::min(attempt, 20) * 500));
    }
    std::vector<RawRDebug> chain;
    if (Status s = ReadDebugChain(mem, r_debug, &chain); !s.ok()) {
      if (mem.last_errno() == ESRCH) return Error{fmt::format("pid {}: it ended while it was read", p->pid)};
      last_why = s.error();
      continue;
    }
    if (chain.front().r_version == 0 || chain.front().r_map == 0) {
      last_why = "the dynamic loader has not set up r_debug yet";
      continue;
    }
    bool busy = false;
    for (const auto& r : chain) busy |= r.r_state != kRtConsistent;
    if (busy) {
      last_why = "the loader was adding or removing objects";
      continue;
    }
    std::vector<Object> objs;
    Status walked = Status::Ok();
    for (size_t ns = 0; ns < chain.size() && walked.ok(); ++ns)
      walked = WalkList(mem, chain[ns].r_map, static_cast<int64_t>(ns), &objs);
    if (!walked.ok()) {
      if (mem.last_errno() == ESRCH) return Error{fmt::format("pid {}: it ended while it was read", p->pid)};
      last_why = walked.error();
      continue;
    }
    const uint64_t read_at = Mono();
    // Read again: the same states and the same lists, or the loader changed them meanwhile.
    std::vector<RawRDebug> again;
    std::vector<Object> objs2;
    bool same = ReadDebugChain(mem, r_debug, &again).ok() && again.size() == chain.size();
    for (size_t ns = 0; same && ns < again.size(); ++ns)
      same = again[ns].r_state == kRtConsistent && again[ns].r_map == chain[ns].r_map &&
             WalkList(mem, again[ns].r_map, static_cast<int64_t>(ns), &objs2).ok();
    if (!same || Shape(objs) != Shape(objs2)) {
      last_why = "the list changed while it was read";
      continue;
    }
    p->r_version = chain.front().r_version;
    p->namespaces = chain.size();
    p->read_mono_ns = read_at;
    p->objects = std::move(objs);
    last_why.clear();
    break;
  }
  if (!last_why.empty())
    return Error{fmt::format("pid {}: its link maps changed while being read, retried {} times: {}; no snapshot taken",
                             p->pid, p->tries, last_why)};
  // Each object's file (the mapping of its dynamic section), facts and build-id.
  const Mapping* vdso = MappingAt(maps, aux.sysinfo_ehdr);
  for (size_t i = 0; i < p->objects.size(); ++i) {
    Object& o = p->objects[i];
    o.is_main = i == 0;
    if (const Mapping* m = MappingAt(maps, o.l_ld)) {
      o.dev = m->dev;
      o.ino = m->ino;
      o.mapped = m->path;
      o.is_vdso = vdso != nullptr && m->start == vdso->start;
    } else {
      p->notes.push_back(fmt::format("{}: its dynamic section ({:#x}) is in no mapping of /proc/{}/maps",
                                     o.name.empty() ? "the program" : o.name, o.l_ld, p->pid));
    }
    o.is_ldso = aux.base != 0 && o.l_addr == aux.base && !o.is_main;
    ReadDynamicFacts(mem, maps, &o);
    ReadBuildId(mem, maps, &o);
  }
  return Status::Ok();
}

}  // namespace ldscope::snapshot
