// What ld.so checks as it loads an object, whatever the binding mode (docs/LOADER.md):
// the version nodes (verneed) it needs of the libraries its NEEDED names were bound to
// (_dl_check_map_versions in dl-version.c: at start-up for every object before main, in
// a dlopen for its new objects before any symbol is looked up). This file holds the
// check, which missing_symbols.cc uses too, and the pass for the version nodes of glibc
// itself: an object built for a newer glibc than the machine's (NEEDS_NEWER_GLIBC).
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"

namespace ldscope::analysis {

namespace {

// glibc's libraries: their version nodes are glibc's own (GLIBC_2.x).
bool IsGlibcLibrary(const std::string& name) {
  static const char* const kNames[] = {"libc.so.6",
                                       "libm.so.6",
                                       "libpthread.so.0",
                                       "libdl.so.2",
                                       "librt.so.1",
                                       "libutil.so.1",
                                       "libresolv.so.2",
                                       "libanl.so.1",
                                       "libnsl.so.1",
                                       "libmvec.so.1",
                                       "libBrokenLocale.so.1",
                                       "libc_malloc_debug.so.0",
                                       "ld-linux-x86-64.so.2",
                                       "ld-linux-aarch64.so.1"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

// "GLIBC_2.38" -> {2, 38}; {0, 0} for anything else (GLIBC_PRIVATE).
std::pair<int, int> GlibcNode(std::string_view v) {
  constexpr std::string_view kPrefix = "GLIBC_";
  if (v.substr(0, kPrefix.size()) != kPrefix) return {0, 0};
  v.remove_prefix(kPrefix.size());
  int major = 0, minor = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), major);
  if (ec != std::errc() || p == v.data() + v.size() || *p != '.') return {0, 0};
  std::from_chars(p + 1, v.data() + v.size(), minor);
  return {major, minor};
}

// "2.36" -> {2, 36}.
std::pair<int, int> VersionPair(std::string_view v) { return GlibcNode("GLIBC_" + std::string(v)); }

std::string Dotted(std::pair<int, int> v) { return fmt::format("{}.{}", v.first, v.second); }

}  // namespace

bool IsGlibcVersionNeed(const std::string& needed_name, const std::string& version) {
  return IsGlibcLibrary(needed_name) && GlibcNode(version).first > 0;
}

std::vector<UnmetVersion> UnmetVersions(Context& ctx, const ProcessIndex& pi, const Obj& o, bool* unknown) {
  std::vector<UnmetVersion> out;
  const elf::ElfInfo* info = ctx.File(o.path);
  if (info == nullptr) {
    *unknown = true;
    return out;
  }
  for (const auto& vn : info->verneeds) {
    const Obj* b = BoundFor(pi, o, vn.file);
    if (b == nullptr) continue;
    const elf::ElfInfo* s = ctx.File(b->path);
    if (s == nullptr) {
      *unknown = true;
      continue;
    }
    for (const auto& v : vn.versions)
      if (!s->DefinesVersion(v)) out.push_back({b, vn.file, v});
  }
  return out;
}

const Obj* StartupVersionFailure(Context& ctx, const ProcessIndex& pi, std::vector<UnmetVersion>* unmet) {
  if (pi.p->exited() || pi.p->still_running()) return nullptr;
  // The objects of start-up, in load order (the order of ld.so's link map, which
  // _dl_check_all_versions walks): the first one that lacks a version stops the program.
  std::vector<const Obj*> startup;
  for (const auto& [id, o] : pi.objects) {
    if (o.load == nullptr || o.rolled_back || o.lmid != 0) continue;
    const v1::LoadReason r = o.load->reason();
    if (r != v1::LOAD_EXECUTABLE && r != v1::LOAD_NEEDED && r != v1::LOAD_PRELOAD) continue;
    startup.push_back(&o);
  }
  std::sort(startup.begin(), startup.end(), LoadedBefore);
  // Up to the first dlopen: a NEEDED of a dlopened object is no start-up object.
  uint64_t first_dlopen = UINT64_MAX;
  for (const auto& [id, o] : pi.objects)
    if (o.load != nullptr && o.load->reason() == v1::LOAD_DLOPEN) first_dlopen = std::min(first_dlopen, o.open_seq);
  for (const Obj* o : startup) {
    if (o->open_seq > first_dlopen) break;
    bool unknown = false;
    std::vector<UnmetVersion> u = UnmetVersions(ctx, pi, *o, &unknown);
    if (!u.empty()) {
      *unmet = std::move(u);
      return o;
    }
  }
  return nullptr;
}

namespace {

class NewerGlibc {
 public:
  NewerGlibc(Context& ctx, v1::Report* out) : ctx_(ctx), out_(out) {}

  void Run() {
    for (const auto& pi : ctx_.processes()) {
      std::vector<UnmetVersion> unmet;
      if (const Obj* o = StartupVersionFailure(ctx_, pi, &unmet)) Report(pi, *o, unmet, nullptr);
      for (const v1::Entry* e : pi.entries)
        if (e->has_failed_dlopen()) FailedDlopen(pi, *e);
    }
  }

 private:
  // The objects a failed dlopen mapped, in load order: the first whose glibc version
  // nodes are not met is the one ld.so named.
  void FailedDlopen(const ProcessIndex& pi, const v1::Entry& e) {
    std::vector<const Obj*> batch;
    for (const auto& r : e.failed_dlopen().rolled_back()) {
      auto it = pi.objects.find(r.id());
      if (it != pi.objects.end() && it->second.load != nullptr) batch.push_back(&it->second);
    }
    std::sort(batch.begin(), batch.end(), LoadedBefore);
    for (const Obj* o : batch)
      for (const auto& n : o->load->needed())
        if (BoundFor(pi, *o, n) == nullptr) return;  // missing_library.cc's
    for (const Obj* o : batch) {
      bool unknown = false;
      const std::vector<UnmetVersion> u = UnmetVersions(ctx_, pi, *o, &unknown);
      if (u.empty()) continue;
      Report(pi, *o, u, &e);
      return;
    }
  }

  // Whether the Python import the load was for failed (the program saw an ImportError).
  static const v1::PyImportSpan* FailedImport(const ProcessIndex& pi, const Obj& o) {
    if (o.load == nullptr || !o.load->has_python()) return nullptr;
    const uint32_t i = o.load->python().import_index();
    if (i == 0 || static_cast<int>(i) > pi.p->imports_size()) return nullptr;
    const v1::PyImportSpan& s = pi.p->imports(i - 1);
    return s.failed() ? &s : nullptr;
  }

  void Report(const ProcessIndex& pi, const Obj& o, const std::vector<UnmetVersion>& unmet, const v1::Entry* e) {
    std::vector<const UnmetVersion*> glibc;
    for (const auto& u : unmet)
      if (IsGlibcVersionNeed(u.file, u.version)) glibc.push_back(&u);
    // Another library's version is missing_symbols.cc's and failed_dlopen.cc's.
    if (glibc.empty()) return;
    const elf::ElfInfo* info = ctx_.File(o.path);  // read: UnmetVersions found what it lacks
    // The newest glibc node it needs (of every glibc library), and the machine's.
    const auto [newest, newest_node, newest_file] = NewestGlibcNode(*info);
    const std::string& have = pi.p->glibc_version();
    std::vector<std::string> lacking;
    for (const UnmetVersion* u : glibc)
      if (std::find(lacking.begin(), lacking.end(), u->version + " of " + u->file) == lacking.end())
        lacking.push_back(u->version + " of " + u->file);
    const UnmetVersion& u0 = *glibc.front();
    const bool startup = e == nullptr;
    const v1::PyImportSpan* import = FailedImport(pi, o);
    const v1::Severity sev = startup || import != nullptr ? v1::ERROR : v1::WARNING;
    FindingBuilder f(pi, v1::NEEDS_NEWER_GLIBC, sev);
    *f.proto().add_objects() = ctx_.Describe(pi, o);
    *f.proto().add_objects() = ctx_.Describe(pi, *u0.bound);
    f.proto().add_evidence(o.open_seq);
    if (e != nullptr) f.proto().add_evidence(e->seq());
    AddMissing(f, *info, o, glibc);
    const std::string base = BaseName(o.path);
    const std::string program = BaseName(pi.p->exe());
    const std::string needs = fmt::format("glibc {}", Dotted(newest));
    const std::string machine = have.empty() ? "an older glibc" : "glibc " + have;
    f.Headline(text::ShowBytes(
        startup ? fmt::format("{} cannot start: {} needs {}, this system has {}", program, base, needs, machine)
                : fmt::format("{} failed to load: it needs {}, this system has {}", base, needs, machine)));
    f.Detail("failed", text::Show("{}, loaded {}", NormalPath(o.path), ctx_.HowLoaded(pi, o)));
    f.Detail("needs", text::Show("{} (the newest glibc version node it needs is {} of {}); this glibc "
                                 "lacks {}",
                                 needs, newest_node, newest_file, fmt::join(lacking, ", ")));
    f.Detail("glibc", text::Show("{} ({}), as ld.so reported it; glibc's version nodes only grow, so "
                                 "an object built against a newer glibc cannot load on an older one",
                                 have.empty() ? "version not recorded" : have, NormalPath(u0.bound->path)));
    f.Detail("loader says", text::Show("version `{}' not found (required by {})", u0.version, NormalPath(o.path)));
    if (startup)
      f.Detail("effect", text::Show("ld.so checks version nodes before main, whatever the binding mode: "
                                    "{} stopped there",
                                    program));
    else if (import != nullptr)
      f.Detail("effect", text::Show("the import of {} failed{}", import->module(),
                                    import->error().empty() ? "" : " (" + import->error() + ")"));
    else
      f.Detail("effect", text::Show("the dlopen failed: {} is not in use", base));
    AddFixes(f, base, have, newest);
    std::move(f).AddTo(out_);
  }

  // The newest glibc version node an object needs (of every glibc library), its name
  // and the file that defines it.
  struct NewestNode {
    std::pair<int, int> node{0, 0};
    std::string name, file;
  };
  static NewestNode NewestGlibcNode(const elf::ElfInfo& info) {
    NewestNode newest;
    for (const auto& vn : info.verneeds)
      for (const auto& v : vn.versions)
        if (IsGlibcVersionNeed(vn.file, v) && GlibcNode(v) > newest.node) {
          newest.node = GlibcNode(v);
          newest.name = v;
          newest.file = vn.file;
        }
    return newest;
  }

  // Each glibc version the object lacks, then the symbols of those versions, which no
  // lookup could bind either.
  static void AddMissing(FindingBuilder& f, const elf::ElfInfo& info, const Obj& o,
                         const std::vector<const UnmetVersion*>& glibc) {
    for (const UnmetVersion* u : glibc) {
      auto* m = f.proto().add_missing();
      m->set_version(u->version);
      m->set_needed_by(o.path);
      m->set_bound_to(NormalPath(u->bound->path));
    }
    info.ForEachSymbol(elf::ElfInfo::Which::kUndefined, [&](const elf::Symbol& s) {
      for (const UnmetVersion* u : glibc)
        if (s.version == u->version && s.version_file == u->file) {
          auto* m = f.proto().add_missing();
          m->set_name(std::string(s.name));
          m->set_version(u->version);
          m->set_needed_by(o.path);
          m->set_bound_to(NormalPath(u->bound->path));
          return;
        }
    });
  }

  // A build of the object for this glibc, or a system with the glibc it needs.
  static void AddFixes(FindingBuilder& f, const std::string& base, const std::string& have,
                       std::pair<int, int> newest) {
    f.Fix(v1::FIX_OLDER_GLIBC_BUILD,
          text::Show("use a build of {} made for glibc {} or older: for a Python wheel, one whose platform tag "
                     "is manylinux_2_{} or lower (manylinux2014 is manylinux_2_17; pip chooses it when the index "
                     "has one), or build it from source on this system",
                     base, have.empty() ? "this" : have,
                     have.empty() ? std::string("X") : std::to_string(VersionPair(have).second)));
    f.Fix(v1::FIX_NEWER_DISTRIBUTION,
          text::Show("or run it on a distribution (or container image) whose glibc is {} or newer", Dotted(newest)));
  }

  Context& ctx_;
  v1::Report* out_;
};

}  // namespace

void FindNewerGlibc(Context& ctx, v1::Report* out) { NewerGlibc(ctx, out).Run(); }

}  // namespace ldscope::analysis
