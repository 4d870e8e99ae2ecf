// See diff.h. Libraries are compared by SONAME (or file name when there is none), per
// namespace; families (libnccl.so.2 and libnccl.so.2.16.2) by Family().
#include "analysis/diff.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "render/render.h"
#include "analysis/analysis.h"
#include "text/strings.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

struct Lib {
  std::string path, step, version, first_loader;
  uint64_t seq = 0;
};

std::string Command(const v1::ProcessTimeline& p) { return text::CommandLine(p.argv(), p.exe()); }

struct FirstLoader {
  std::string operation;  // what loaded it: reason and requester (not the file it found)
  std::string text;       // for people
};

// key -> library, and family -> which operation loaded its first copy.
void Libraries(Context& ctx, const ProcessIndex& pi, std::map<std::string, Lib>* libs,
               std::map<std::string, FirstLoader>* first_of_family) {
  std::map<std::string, uint64_t> family_seq;
  for (const auto& [id, o] : pi.objects) {
    if (o.load == nullptr || o.load->reason() == v1::LOAD_VDSO || o.rolled_back) continue;
    const std::string name = o.soname.empty() ? BaseName(o.path) : o.soname;
    const std::string key = o.lmid == 0 ? name : fmt::format("{} (namespace {})", name, o.lmid);
    if (libs->count(key)) continue;  // the first copy speaks for the library
    Lib l;
    l.path = NormalPath(o.path);
    l.step = render::FoundByWord(*o.load);
    l.version = ctx.VersionOf(o.path, o.soname);
    l.seq = o.open_seq;
    (*libs)[key] = l;
    const std::string fam = Family(name);
    if (!family_seq.count(fam) || o.open_seq < family_seq[fam]) {
      family_seq[fam] = o.open_seq;
      auto req = pi.objects.find(o.requester);
      // Who loaded it: how, from which object, and in Python during which top-level
      // import (not the line: an edited script moves lines without changing anything).
      (*first_of_family)[fam] = {
          fmt::format("{}|{}|{}", static_cast<int>(o.load->reason()),
                      req == pi.objects.end() ? std::string() : NormalPath(req->second.path),
                      o.load->python().top_module()),
          fmt::format("{} loaded {}", l.path, ctx.HowLoaded(pi, o))};
    }
  }
}

void Add(v1::ProcessDiff* pd, v1::Change::Kind kind, const std::string& lib, const std::string& base,
         const std::string& now) {
  auto* c = pd->add_changes();
  c->set_kind(kind);
  c->set_library(lib);
  c->set_base(base);
  c->set_new_(now);
}

std::string FindingKey(const v1::Finding& f) {
  std::vector<std::string> paths;
  for (const auto& o : f.objects()) paths.push_back(o.path());
  std::sort(paths.begin(), paths.end());
  std::string k = std::to_string(f.kind()) + "|" + f.exe();
  for (const auto& p : paths) k += "|" + p;
  return k;
}

}  // namespace

v1::Diff DiffTimelines(const v1::Timeline& base, const v1::Timeline& now,
                       const elf::TraceFacts* base_facts, const elf::TraceFacts* now_facts) {
  v1::Diff d;
  // One context per trace, for the passes and the comparison. The passes run first, so
  // that what they read (and the notes on it) does not depend on the comparison.
  Context bctx(base, base_facts), nctx(now, now_facts);
  const v1::Report br = Analyze(bctx), nr = Analyze(nctx);
  // Pair processes by command line, in order of appearance.
  std::map<std::string, std::vector<const ProcessIndex*>> bmap, nmap;
  for (const auto& pi : bctx.processes()) bmap[Command(*pi.p)].push_back(&pi);
  for (const auto& pi : nctx.processes()) nmap[Command(*pi.p)].push_back(&pi);
  std::set<std::string> commands;
  for (const auto& [c, v] : bmap) commands.insert(c);
  for (const auto& [c, v] : nmap) commands.insert(c);
  for (const auto& cmd : commands) {
    const auto& bs = bmap[cmd];
    const auto& ns = nmap[cmd];
    for (size_t i = 0; i < std::max(bs.size(), ns.size()); ++i) {
      v1::ProcessDiff pd;
      pd.set_command(cmd);
      if (i >= bs.size()) {
        pd.set_new_pid(ns[i]->p->pid());
        Add(&pd, v1::Change::PROCESS_ADDED, cmd, "", ns[i]->p->exe());
        *d.add_processes() = pd;
        continue;
      }
      if (i >= ns.size()) {
        pd.set_base_pid(bs[i]->p->pid());
        Add(&pd, v1::Change::PROCESS_REMOVED, cmd, bs[i]->p->exe(), "");
        *d.add_processes() = pd;
        continue;
      }
      pd.set_base_pid(bs[i]->p->pid());
      pd.set_new_pid(ns[i]->p->pid());
      std::map<std::string, Lib> bl, nl;
      std::map<std::string, FirstLoader> bf, nf;
      Libraries(bctx, *bs[i], &bl, &bf);
      Libraries(nctx, *ns[i], &nl, &nf);
      for (const auto& [key, l] : bl)
        if (!nl.count(key)) Add(&pd, v1::Change::LIBRARY_REMOVED, key, l.path, "");
      for (const auto& [key, l] : nl) {
        auto it = bl.find(key);
        if (it == bl.end()) {
          Add(&pd, v1::Change::LIBRARY_ADDED, key, "", l.path);
          continue;
        }
        const Lib& b = it->second;
        if (b.path != l.path) Add(&pd, v1::Change::MOVED, key, b.path, l.path);
        if (b.step != l.step) Add(&pd, v1::Change::FOUND_BY_CHANGED, key, b.step, l.step);
        if (b.version != l.version) Add(&pd, v1::Change::VERSION_CHANGED, key, b.version, l.version);
      }
      // Another operation loading a family's first copy is an import-order change; the
      // same operation finding another file is the move already reported.
      for (const auto& [fam, first] : nf) {
        auto it = bf.find(fam);
        if (it != bf.end() && it->second.operation != first.operation)
          Add(&pd, v1::Change::FIRST_LOADER_CHANGED, fam, it->second.text, first.text);
      }
      if (pd.changes_size() > 0) *d.add_processes() = pd;
    }
  }
  std::set<std::string> bkeys, nkeys;
  for (const auto& f : br.findings()) bkeys.insert(FindingKey(f));
  for (const auto& f : nr.findings()) nkeys.insert(FindingKey(f));
  for (const auto& f : nr.findings())
    if (!bkeys.count(FindingKey(f))) *d.add_new_findings() = f;
  for (const auto& f : br.findings())
    if (!nkeys.count(FindingKey(f))) *d.add_resolved_findings() = f;
  render::EscapeByteFields(&d, {"ldscope.v1.Finding"});  // the changes' bytes; findings are text
  return d;
}

}  // namespace ldscope::analysis
