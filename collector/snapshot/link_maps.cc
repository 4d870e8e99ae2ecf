// The link maps of a running process (snapshot.h): r_debug, the namespaces' lists, and
// each object's dynamic section and build-id, all read from the target's memory.
#include <elf.h>
#include <link.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
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
  const size_t room = std::min(static_cast<size_t>((m->end - addr) / sizeof(Elf64_Dyn)), kMaxDynamic);
  // 64 entries at a time (most dynamic sections hold fewer than 40).
  for (size_t at = 0; at < room;) {
    const size_t n = std::min<size_t>(64, room - at);
    out->resize(at + n);
    if (!mem.Read(addr + at * sizeof(Elf64_Dyn), out->data() + at, n * sizeof(Elf64_Dyn))) {
      out->resize(at);
      return at > 0;
    }
    for (size_t i = at; i < at + n; ++i)
      if ((*out)[i].d_tag == DT_NULL) {
        out->resize(i);
        return true;
      }
    at += n;
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

// Where one object's strings lie among the pieces read for all objects.
struct StringPlan {
  size_t first = 0, count = 0;
  bool soname = false, rpath = false, runpath = false;
  uint64_t limit = 0;  // the end of its string table (DT_STRSZ, within the mapping)
};

// The object's DT_FLAGS_1, and the pieces of its string table that hold its SONAME,
// RPATH, RUNPATH and NEEDED names (each at most 256 bytes, none past DT_STRSZ or the
// mapping), appended to pieces.
StringPlan PlanStrings(const std::vector<Mapping>& maps, const std::vector<Elf64_Dyn>& dyn, Object* o,
                       std::vector<std::pair<uint64_t, size_t>>* pieces) {
  StringPlan plan;
  plan.first = pieces->size();
  uint64_t strtab = 0, strsz = 0;
  int64_t soname = -1, rpath = -1, runpath = -1;
  std::vector<uint64_t> offs;
  for (const auto& d : dyn) {
    switch (d.d_tag) {
      case DT_STRTAB:
        strtab = d.d_un.d_ptr;
        break;
      case DT_STRSZ:
        strsz = d.d_un.d_val;
        break;
      case DT_SONAME:
        soname = static_cast<int64_t>(d.d_un.d_val);
        break;
      case DT_RPATH:
        rpath = static_cast<int64_t>(d.d_un.d_val);
        break;
      case DT_RUNPATH:
        runpath = static_cast<int64_t>(d.d_un.d_val);
        break;
      case DT_FLAGS_1:
        o->flags_1 = d.d_un.d_val;
        break;
      case DT_NEEDED:
        if (offs.size() < kMaxNeeded) offs.push_back(d.d_un.d_val);
        break;
      default:
        break;
    }
  }
  if (strtab == 0) return plan;
  strtab = DynAddr(maps, strtab, o->l_addr, o->dev, o->ino);
  const Mapping* m = MappingAt(maps, strtab);
  if (m == nullptr) return plan;
  plan.limit = std::min(m->end, strsz != 0 && strtab + strsz > strtab ? strtab + strsz : m->end);
  std::vector<uint64_t> all;
  if ((plan.soname = soname >= 0)) all.push_back(static_cast<uint64_t>(soname));
  if ((plan.rpath = rpath >= 0)) all.push_back(static_cast<uint64_t>(rpath));
  if ((plan.runpath = runpath >= 0)) all.push_back(static_cast<uint64_t>(runpath));
  all.insert(all.end(), offs.begin(), offs.end());
  for (uint64_t off : all) {
    const uint64_t at = strtab + off;
    if (at < strtab || at >= plan.limit)
      pieces->push_back({strtab, 0});
    else
      pieces->push_back({at, static_cast<size_t>(std::min<uint64_t>(256, plan.limit - at))});
  }
  plan.count = all.size();
  return plan;
}

// The strings of a plan, from the pieces read (a string longer than its piece is read
// again, whole).
void ApplyStrings(Memory& mem, const StringPlan& plan, const std::vector<std::pair<uint64_t, size_t>>& pieces,
                  const std::vector<std::string>& got, Object* o) {
  std::vector<std::string> text(plan.count);
  for (size_t k = 0; k < plan.count; ++k) {
    const auto& piece = pieces[plan.first + k];
    const std::string& g = got[plan.first + k];
    const size_t nul = g.find('\0');
    if (nul != std::string::npos)
      text[k] = g.substr(0, nul);
    else if (piece.second > 0)
      mem.ReadString(piece.first, std::min<uint64_t>(kMaxString, plan.limit - piece.first), &text[k]);
  }
  size_t k = 0;
  if (plan.soname) o->soname = text[k++];
  if (plan.rpath) o->rpath = text[k++];
  if (plan.runpath) o->runpath = text[k++];
  for (; k < text.size(); ++k) o->needed.push_back(text[k]);
}

// Every object's dynamic facts: the dynamic sections in one batch of reads, then all the
// strings in another (each object again on its own when a batch fails).
void ReadDynamicFacts(Memory& mem, const std::vector<Mapping>& maps, std::vector<Object>* objs) {
  const size_t n = objs->size();
  std::vector<std::pair<uint64_t, size_t>> dyn_pieces(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t at = (*objs)[i].l_ld;
    const Mapping* m = MappingAt(maps, at);
    dyn_pieces[i] = {at, m == nullptr
                             ? 0
                             : static_cast<size_t>(std::min<uint64_t>(
                                   64 * sizeof(Elf64_Dyn), (m->end - at) / sizeof(Elf64_Dyn) * sizeof(Elf64_Dyn)))};
  }
  std::vector<std::string> dyn_got;
  const bool batch = mem.ReadMany(dyn_pieces, &dyn_got);
  std::vector<std::pair<uint64_t, size_t>> pieces;
  std::vector<StringPlan> plans(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<Elf64_Dyn> dyn;
    bool whole = false;
    if (batch) {
      const std::string& g = dyn_got[i];
      for (size_t at = 0; at + sizeof(Elf64_Dyn) <= g.size(); at += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        std::memcpy(&d, g.data() + at, sizeof d);
        if (d.d_tag == DT_NULL) {
          whole = true;
          break;
        }
        dyn.push_back(d);
      }
    }
    // Not read in the batch, or longer than its first 64 entries: on its own.
    if (!whole && !ReadDynamic(mem, maps, (*objs)[i].l_ld, &dyn)) continue;
    plans[i] = PlanStrings(maps, dyn, &(*objs)[i], &pieces);
  }
  std::vector<std::string> got;
  if (mem.ReadMany(pieces, &got)) {
    for (size_t i = 0; i < n; ++i) ApplyStrings(mem, plans[i], pieces, got, &(*objs)[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const std::vector<std::pair<uint64_t, size_t>> own(
        pieces.begin() + static_cast<long>(plans[i].first),
        pieces.begin() + static_cast<long>(plans[i].first + plans[i].count));
    std::vector<std::string> own_got;
    if (!mem.ReadMany(own, &own_got)) continue;
    StringPlan local = plans[i];
    local.first = 0;
    ApplyStrings(mem, local, own, own_got, &(*objs)[i]);
  }
}

// headers: each file's mappings at offset 0, by (dev, ino), in address order.
using Headers = std::map<std::pair<uint64_t, uint64_t>, std::vector<const Mapping*>>;

void ReadBuildId(Memory& mem, const std::vector<Mapping>& maps, const Headers& headers, Object* o) {
  const Mapping* header = nullptr;
  const Mapping* dyn_map = MappingAt(maps, o->l_ld);
  if (dyn_map == nullptr) return;
  if (o->is_vdso) {
    header = dyn_map;
  } else if (auto it = headers.find({o->dev, o->ino}); it != headers.end()) {
    // The last one below the dynamic section (a file mapped twice: this object's copy).
    for (const Mapping* m : it->second)
      if (m->start <= o->l_ld) header = m;
  }
  if (header == nullptr) return;
  // The ELF header and, usually right after it, the program headers: one read.
  char head[1024];
  const size_t head_len = static_cast<size_t>(std::min<uint64_t>(sizeof head, header->end - header->start));
  Elf64_Ehdr eh;
  if (head_len < sizeof eh || !mem.Read(header->start, head, head_len)) return;
  std::memcpy(&eh, head, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > kMaxPhdrs)
    return;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  const size_t ph_len = ph.size() * sizeof(Elf64_Phdr);
  if (eh.e_phoff <= head_len && ph_len <= head_len - eh.e_phoff)
    std::memcpy(ph.data(), head + eh.e_phoff, ph_len);
  else if (!mem.Read(header->start + eh.e_phoff, ph.data(), ph_len))
    return;
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
    if (seen.size() >= kMaxObjects)
      return Error{fmt::format("namespace {} lists more than {} objects", lmid, kMaxObjects)};
    if (!seen.insert(at).second)
      return Error{fmt::format("namespace {}'s list loops back to an object it listed", lmid)};
    RawLinkMap lm;
    if (!mem.ReadValue(at, &lm))
      return Error{fmt::format("cannot read a link_map of namespace {} at {:#x}: {}", lmid, at,
                               std::strerror(mem.last_errno()))};
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
    if (out->size() >= kMaxNamespaces)
      return Error{fmt::format("more than {} namespaces chained from r_debug", kMaxNamespaces)};
    if (!seen.insert(at).second) return Error{"the namespaces' r_debug chain loops"};
    RawRDebug r{};
    // The first is a whole r_debug_extended only from r_version 2 on.
    const size_t size = out->empty() ? offsetof(RawRDebug, r_next) : sizeof r;
    if (!mem.Read(at, &r, size))
      return Error{fmt::format("cannot read r_debug at {:#x}: {}", at, std::strerror(mem.last_errno()))};
    if (out->empty() && r.r_version >= 2 && !mem.ReadValue(at + offsetof(RawRDebug, r_next), &r.r_next))
      return Error{fmt::format("cannot read r_debug_extended at {:#x}", at)};
    out->push_back(r);
    if (r.r_version < 2) break;
    at = r.r_next;
  }
  return Status::Ok();
}

// Read again: the same states and the same lists, or the loader changed them meanwhile.
// Every link_map in one batch: each still links to the next of the first walk.
bool ListUnchanged(Memory& mem, uint64_t r_debug, const std::vector<RawRDebug>& chain,
                   const std::vector<Object>& objs) {
  std::vector<RawRDebug> again;
  bool same = ReadDebugChain(mem, r_debug, &again).ok() && again.size() == chain.size();
  for (size_t ns = 0; same && ns < again.size(); ++ns)
    same = again[ns].r_state == kRtConsistent && again[ns].r_map == chain[ns].r_map;
  std::vector<std::pair<uint64_t, size_t>> maps_again;
  for (const auto& o : objs) maps_again.push_back({o.map, sizeof(RawLinkMap)});
  std::vector<std::string> got;
  same = same && mem.ReadMany(maps_again, &got);
  for (size_t i = 0; same && i < objs.size(); ++i) {
    RawLinkMap lm;
    std::memcpy(&lm, got[i].data(), sizeof lm);
    const bool last = i + 1 == objs.size() || objs[i + 1].lmid != objs[i].lmid;
    same = lm.l_ld == objs[i].l_ld && lm.l_next == (last ? 0 : objs[i + 1].map);
  }
  return same;
}

// Each object's file (the mapping of its dynamic section), facts and build-id.
void DescribeObjects(Memory& mem, const std::vector<Mapping>& maps, const Auxv& aux, Process* p) {
  const Mapping* vdso = MappingAt(maps, aux.sysinfo_ehdr);
  Headers headers;
  for (const auto& m : maps)
    if (m.offset == 0 && m.ino != 0) headers[{m.dev, m.ino}].push_back(&m);
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
    ReadBuildId(mem, maps, headers, &o);
  }
  ReadDynamicFacts(mem, maps, &p->objects);
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
    if (!ListUnchanged(mem, r_debug, chain, objs)) {
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
  DescribeObjects(mem, maps, aux, p);
  return Status::Ok();
}

}  // namespace ldscope::snapshot
