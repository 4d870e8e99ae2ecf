// See context.h.
#include "analysis/context.h"

#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "render/python_text.h"
#include "text/escape.h"
#include "render/words.h"

namespace ldscope::analysis {

const Files::DiskRead& Files::ReadDisk(const std::string& path) {
  auto [it, fresh] = disk_.try_emplace(path);
  if (fresh) {
    Result<std::unique_ptr<elf::ElfInfo>> read = elf::ReadElf(path);
    if (read.ok())
      it->second.info = std::move(read).value();
    else
      it->second.error = read.error();
  }
  return it->second;
}

void Files::Adopt(std::unique_ptr<elf::ElfInfo> info) {
  const std::string path = info->path;
  Store().disk_[path] = DiskRead{std::move(info), ""};
}

Result<const elf::ElfInfo*> Files::MadeFromFacts(const std::string& path, const elf::FactsRecord& rec) {
  // Keyed by the record's content: hosts whose traces recorded the same facts share one,
  // and only the first decodes the record.
  std::string key = path;
  key += '\0';
  key += rec.bytes;
  auto [it, fresh] = from_facts_.try_emplace(std::move(key));
  if (fresh) {
    v1::ObjectFacts whole;
    Result<std::unique_ptr<elf::ElfInfo>> made = Error{"the trace's ELF facts of it are corrupt"};
    if (rec.Decode(&whole)) made = elf::FromFacts(whole, path);
    if (made.ok())
      it->second.first = std::move(made).value();
    else
      it->second.second = made.error();
  }
  if (it->second.first == nullptr) return Error{it->second.second};
  return static_cast<const elf::ElfInfo*>(it->second.first.get());
}

const elf::ElfInfo* Files::Get(const std::string& path) {
  if (path.empty() || path.front() != '/') return nullptr;
  auto it = answers_.find(path);
  if (it != answers_.end()) return it->second;
  const DiskRead& disk = Store().ReadDisk(path);
  const elf::ElfInfo* info = disk.info.get();
  std::string err = disk.error;
  const elf::FactsRecord* rec = facts_ != nullptr ? facts_->ForPath(path) : nullptr;
  if (rec != nullptr && rec->unreadable.empty()) {
    std::string changed;
    if (info != nullptr && !rec->build_id.empty() && info->build_id != rec->build_id)
      changed = info->build_id.empty() ? "no build-id now" : "another build-id now";
    else if (info != nullptr && rec->build_id.empty() &&
             (info->size != rec->size || info->mtime_ns != rec->mtime_ns))
      changed = "another size or modification time now";
    if (info == nullptr || !changed.empty()) {
      if (const Result<const elf::ElfInfo*> from_trace = Store().MadeFromFacts(path, *rec); from_trace.ok()) {
        if (!changed.empty()) changed_[path] = changed;
        info = *from_trace;
      } else if (info == nullptr) {
        err = fmt::format("{}: {}", path, from_trace.error());
      }
    }
  }
  if (info == nullptr) errors_[path] = err;
  return answers_[path] = info;
}

std::string Files::FindString(const std::string& path, std::string_view needle) {
  const elf::ElfInfo* e = Get(path);
  if (e == nullptr || !e->from_trace) {
    std::string key = path + '\0' + std::string(needle);
    auto& cache = Store().disk_string_;
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(std::move(key), elf::FindString(path, needle)).first;
    return it->second;
  }
  auto it = e->found.find(std::string(needle));
  return it == e->found.end() || it->second.empty() ? "" : it->second.front();
}

std::vector<std::string> Files::FindStrings(const std::string& path, std::string_view needle) {
  const elf::ElfInfo* e = Get(path);
  if (e == nullptr || !e->from_trace) {
    std::string key = path + '\0' + std::string(needle);
    auto& cache = Store().disk_strings_;
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(std::move(key), elf::FindStrings(path, needle)).first;
    return it->second;
  }
  auto it = e->found.find(std::string(needle));
  return it == e->found.end() ? std::vector<std::string>() : it->second;
}

SymbolScope::SymbolScope(std::vector<const elf::ElfInfo*> objects) : objects_(std::move(objects)) {
  order_.resize(objects_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<uint32_t>(i);
}

bool SymbolScope::Defines(const elf::SymbolQuery& q) const {
  for (size_t k = 0; k < order_.size(); ++k) {
    if (!objects_[order_[k]]->Defines(q)) continue;
    std::rotate(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k),
                order_.begin() + static_cast<std::ptrdiff_t>(k) + 1);
    return true;
  }
  return false;
}

bool AnyDefines(const std::vector<const elf::ElfInfo*>& scope, std::string_view name,
                std::string_view version) {
  const elf::SymbolQuery q(name, version);
  for (const elf::ElfInfo* e : scope)
    if (e->Defines(q)) return true;
  return false;
}

std::string NormalPath(const std::string& path) {
  if (path.empty() || path.front() != '/') return path;
  return std::filesystem::path(path).lexically_normal().string();
}

std::string Family(const std::string& soname_or_name) {
  std::string n = BaseName(soname_or_name);
  const auto so = n.find(".so");
  if (so != std::string::npos) n = n.substr(0, so);
  // A wheel's hash suffix, "-[0-9a-f]{8}" at the end, goes (by hand: a std::regex here
  // was a fifth of `report`'s time on a trace of many objects, called per object).
  if (n.size() >= 9 && n[n.size() - 9] == '-' &&
      std::all_of(n.end() - 8, n.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    n.erase(n.size() - 9);
  return n;
}

v1::Finding NewFinding(const ProcessIndex& pi, v1::FindingKind kind, v1::Severity sev) {
  v1::Finding f;
  f.set_kind(kind);
  f.set_severity(sev);
  f.set_pid(pi.p->pid());
  f.set_exe(pi.p->exe());
  f.set_stream(pi.p->stream());
  return f;
}

void AddDetail(v1::Finding* f, const std::string& label, const std::string& text) {
  auto* d = f->add_details();
  d->set_label(label);
  d->set_text(text);
}

void AddFix(v1::Finding* f, const std::string& action, const std::string& text) {
  auto* x = f->add_fixes();
  x->set_action(action);
  x->set_text(text);
}

namespace {

// The user's own line that made a load: the top-level import, else the ctypes call.
struct Site {
  std::string what;
  v1::SourceLine frame;
  bool import = false;
};

bool UserSite(const Obj& o, Site* s) {
  if (o.load == nullptr) return false;
  const v1::PyCause& py = o.load->python();
  if (!py.top_module().empty()) {
    *s = {"import " + py.top_module(), py.top_site(), true};
    return true;
  }
  if (py.dlopen_call().empty()) return false;
  *s = {py.dlopen_call(), py.call_site(), false};
  return true;
}

}  // namespace

void AddSwapFix(const ProcessIndex& pi, const Obj& late, const Obj& early, v1::Finding* f) {
  Site mine, theirs;
  if (!UserSite(late, &mine) || !UserSite(early, &theirs)) return;
  if (mine.frame.file() != theirs.frame.file() || mine.frame.line() <= theirs.frame.line()) return;
  const std::string cwd = pi.p->cwd();
  AddFix(f, mine.import && theirs.import ? "swap-imports" : "swap-loads",
         fmt::format("move `{}` ({}) above `{}` ({}), so that {} is loaded before {}", mine.what,
                     render::PyFrameText(mine.frame, cwd), theirs.what,
                     render::PyFrameText(theirs.frame, cwd), BaseName(late.path),
                     BaseName(early.path)));
}

std::vector<const Obj*> ProcessIndex::AliveAt(int64_t lmid, uint64_t seq) const {
  std::vector<const Obj*> out;
  for (const auto& [id, o] : objects)
    if (o.lmid == lmid && o.open_seq <= seq && seq < o.close_seq) out.push_back(&o);
  return out;
}

void ProcessIndex::Index() {
  for (const auto& [id, o] : objects) {
    if (o.load != nullptr && o.load->reason() == v1::LOAD_EXECUTABLE && exe == nullptr) exe = &o;
    if (o.load != nullptr) by_request.try_emplace({o.requester, o.load->requested_name()}, &o);
    if (!o.soname.empty()) by_soname[o.soname].push_back(&o);
  }
}

const Obj* ProcessIndex::AliveWithSoname(const std::string& soname, int64_t lmid,
                                         uint64_t seq) const {
  auto it = by_soname.find(soname);
  if (it == by_soname.end()) return nullptr;
  for (const Obj* o : it->second)
    if (o->lmid == lmid && o->open_seq <= seq && seq < o->close_seq) return o;
  return nullptr;
}

const Obj* ProcessIndex::Executable() const { return exe; }

loader::Object ProcessIndex::AsRequester(const Obj& o, Files& files) const {
  loader::Object r;
  r.path = o.path;
  if (o.load != nullptr) {
    r.rpath = o.load->rpath();
    r.runpath = o.load->runpath();
  }
  if (const elf::ElfInfo* e = files.Get(o.path)) {
    if (o.load == nullptr) {
      r.rpath = e->rpath;
      r.runpath = e->runpath;
    }
    r.nodeflib = (e->flags_1 & DF_1_NODEFLIB) != 0;
  }
  return r;
}

std::vector<loader::Object> ProcessIndex::LoaderChain(const Obj& o, Files& files) const {
  std::vector<loader::Object> chain;
  std::vector<uint64_t> seen = {o.id};
  // l_loader: the object whose NEEDED entry loaded it. A dlopened object has none (glibc
  // clears the loader for __RTLD_CALLMAP, docs/LOADER.md), so the walk stops there.
  for (const Obj* cur = &o; chain.size() < 64;) {
    if (cur->load == nullptr || cur->load->reason() == v1::LOAD_DLOPEN) break;
    const uint64_t r = cur->requester;
    if (r == 0 || std::find(seen.begin(), seen.end(), r) != seen.end()) break;
    seen.push_back(r);
    auto it = objects.find(r);
    if (it == objects.end()) break;
    chain.push_back(AsRequester(it->second, files));
    cur = &it->second;
  }
  if (exe != nullptr && std::find(seen.begin(), seen.end(), exe->id) == seen.end())
    chain.push_back(AsRequester(*exe, files));
  return chain;
}

// The object glibc bound O's NEEDED name to.
const Obj* BoundFor(const ProcessIndex& pi, const Obj& o, const std::string& name) {
  if (o.load != nullptr)
    for (const auto& r : o.load->reused())
      if (r.name() == name) {
        auto it = pi.objects.find(r.object().id());
        if (it != pi.objects.end()) return &it->second;
      }
  if (auto it = pi.by_request.find({o.id, name}); it != pi.by_request.end()) return it->second;
  if (name.empty()) return nullptr;
  return pi.AliveWithSoname(name, o.lmid, o.open_seq);
}

Context::Context(const v1::Timeline& t, const elf::TraceFacts* facts, Files* files)
    : t_(t), files_(files != nullptr ? files : &own_files_) {
  if (facts != nullptr) files_->set_trace_facts(facts);
  cache_status_ = cache_.Load();
  const bool multiarch = [] {
    struct stat st;
    return stat("/lib/x86_64-linux-gnu", &st) == 0;
  }();
  for (const auto& p : t.processes()) {
    ProcessIndex pi;
    pi.p = &p;
    // The model's object table (timeline.proto's LoadedObject), indexed by id.
    pi.objects.reserve(static_cast<size_t>(p.objects_size()));
    for (const auto& lo : p.objects()) {
      Obj& o = pi.objects.try_emplace(pi.objects.end(), lo.object().id())->second;
      o.id = lo.object().id();
      o.path = lo.object().path();
      o.soname = lo.object().soname();
      o.lmid = lo.object().lmid();
      o.open_seq = lo.open_seq();
      if (lo.has_close_seq()) o.close_seq = lo.close_seq();
      o.requester = lo.requester();
      o.rolled_back = lo.rolled_back();
      if (lo.load_entry() == 0 || lo.load_entry() > static_cast<uint32_t>(p.entries_size())) continue;
      const v1::Entry& e = p.entries(static_cast<int>(lo.load_entry() - 1));
      o.load = &e.load();
      o.dev = o.load->dev();
      o.ino = o.load->ino();
      o.build_id = o.load->build_id();
      o.at_ms = e.offset_ns() / 1e6;
    }
    pi.env.subdirs.assign(p.hwcaps_subdirs().begin(), p.hwcaps_subdirs().end());
    const std::vector<std::string> learnt_defaults(p.default_dirs().begin(), p.default_dirs().end());
    auto env = p.env().find("LD_LIBRARY_PATH");
    if (env != p.env().end())
      for (const auto& dir : loader::SplitPath(env->second))  // relative: to the start's cwd
        pi.env.ld_library_path.push_back(dir.front() == '/' || p.cwd().empty() ? dir
                                                                               : NormalPath(p.cwd() + "/" + dir));
    pi.env.cache = &cache_;
    pi.env.default_dirs = learnt_defaults;
    if (pi.env.default_dirs.empty())
      pi.env.default_dirs = multiarch ? std::vector<std::string>{"/lib/x86_64-linux-gnu",
                                                                 "/usr/lib/x86_64-linux-gnu",
                                                                 "/lib", "/usr/lib"}
                                      : std::vector<std::string>{"/lib64", "/usr/lib64"};
    if (!multiarch) pi.env.lib = "lib64";
    procs_.push_back(std::move(pi));
    ProcessIndex& added = procs_.back();
    added.Index();
    // The executable's machine is the process's: ld.so skips candidates of another.
    if (added.exe != nullptr) {
      added.env.machine = elf::MachineOf(added.exe->path);
      const elf::TraceFacts* tf = files_->trace_facts();
      const elf::FactsRecord* rec = tf != nullptr ? tf->ForPath(added.exe->path) : nullptr;
      if (added.env.machine == 0 && rec != nullptr) added.env.machine = static_cast<uint16_t>(rec->machine);
    }
  }
}

std::string Context::VersionOf(const std::string& path, const std::string& soname) {
  auto it = versions_.find(path);
  if (it != versions_.end()) return it->second;
  std::string v;
  const std::string family = Family(soname.empty() ? path : soname);
  if (family == "libnccl") {
    const std::string s = files_->FindString(path, "NCCL version ");
    if (!s.empty()) v = "NCCL " + s.substr(std::string("NCCL version ").size());
    // The string is printed as is by NCCL ("NCCL version 2.28.3 compiled with CUDA
    // 13.0\n" in Ubuntu's build): the version without its line break. v is escaped text
    // (the break is the two characters `\n` there): trimmed as raw bytes.
    std::string raw = text::Unescape(v);
    while (!raw.empty() && std::isspace(static_cast<unsigned char>(raw.back()))) raw.pop_back();
    v = text::Escape(raw);
  }
  if (v.empty() && family == "libstdc++") {
    if (const elf::ElfInfo* e = files_->Get(path)) {
      std::string best;
      for (const auto& d : e->verdefs)
        if (d.rfind("GLIBCXX_3.4", 0) == 0 && (d.size() > best.size() || (d.size() == best.size() && d > best)))
          best = d;
      v = best;
    }
  }
  if (v.empty()) {
    // From the file name: libnccl.so.2.16.2 -> 2.16.2 (only when the name says more
    // than the SONAME does).
    const std::string base = BaseName(path);
    const auto so = base.find(".so.");
    if (so != std::string::npos && base != soname) v = base.substr(so + 4);
  }
  return versions_[path] = v;
}

std::string Context::HowLoaded(const ProcessIndex& pi, const Obj& o) const {
  if (o.load == nullptr) return "by the parent process (inherited over fork)";
  auto requester = [&]() -> std::string {
    auto it = pi.objects.find(o.requester);
    return it == pi.objects.end() ? std::string("(unknown object)") : NormalPath(it->second.path);
  };
  const std::string step = render::FoundByWord(*o.load);
  // In traced Python: the ctypes call or import behind the load, in the user's terms.
  const v1::PyCause& py = o.load->python();
  const std::string cause = render::PyCauseText(py, pi.p->cwd());
  if (py.by_hook()) return "by " + cause;
  if (o.load->reason() == v1::LOAD_DLOPEN && !py.dlopen_call().empty()) return "by " + cause;
  const std::string for_cause = cause.empty() ? "" : ", for " + cause;
  switch (o.load->reason()) {
    case v1::LOAD_EXECUTABLE: return "as the executable";
    case v1::LOAD_INTERPRETER: return "as the dynamic loader";
    case v1::LOAD_VDSO: return "by the kernel (vDSO)";
    case v1::LOAD_PRELOAD: return "by LD_PRELOAD";
    case v1::LOAD_NEEDED:
      return (step.empty() ? fmt::format("as a NEEDED of {}", requester())
                           : fmt::format("as a NEEDED of {} (found via {})", requester(), step)) +
             for_cause;
    case v1::LOAD_DLOPEN: return fmt::format("by a dlopen from {}", requester()) + for_cause;
    default: return "";
  }
}

v1::Library Context::Describe(const ProcessIndex& pi, const Obj& o) {
  v1::Library l;
  l.set_path(NormalPath(o.path));
  l.set_soname(o.soname);
  l.set_version(VersionOf(o.path, o.soname));
  l.set_build_id(o.build_id);
  l.set_lmid(o.lmid);
  l.set_loaded_by(HowLoaded(pi, o));
  l.set_seq(o.open_seq);
  l.set_at_ms(o.at_ms);
  if (o.load != nullptr) l.set_found_by(render::FoundByWord(*o.load));
  if (o.load != nullptr && o.load->has_python()) *l.mutable_python() = o.load->python();
  return l;
}

bool Context::SameFile(const std::string& a, const std::string& b) {
  if (a == b) return true;
  struct stat sa, sb;
  if (stat(text::Unescape(a).c_str(), &sa) != 0 || stat(text::Unescape(b).c_str(), &sb) != 0)
    return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace ldscope::analysis
