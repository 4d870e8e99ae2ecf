// See context.h.
#include "analysis/context.h"

#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <unordered_set>

#include <fmt/format.h>

#include "analysis/finding_builder.h"
#include "analysis/py_statements.h"
#include "text/parallel.h"
#include "render/python_text.h"
#include "text/escape.h"
#include "render/words.h"
#include "text/shown.h"

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

void Files::ReadAhead(const std::vector<std::string>& paths) {
  auto& disk = Store().disk_;
  std::vector<std::string> todo;
  std::unordered_set<std::string_view> asked;
  for (const std::string& path : paths)
    if (!path.empty() && path.front() == '/' && disk.count(path) == 0 && asked.insert(path).second)
      todo.push_back(path);
  std::vector<DiskRead> read(todo.size());
  text::ParallelFor(todo.size(), 32, [&](size_t i) {
    Result<std::unique_ptr<elf::ElfInfo>> r = elf::ReadElf(todo[i]);
    if (!r.ok()) {
      read[i].error = r.error();
      return;
    }
    read[i].info = std::move(r).value();
    read[i].info->IndexUndefined();
  });
  for (size_t i = 0; i < todo.size(); ++i) disk.emplace(std::move(todo[i]), std::move(read[i]));
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
        err = fmt::format("{}: {}", text::Escape(path), from_trace.error());
      }
    }
  }
  if (rec != nullptr && !rec->unreadable.empty() && !rec->build_id.empty() &&
      (info == nullptr || info->build_id != rec->build_id)) {
    // The trace's writer found the file changed after the program loaded it (the record
    // names the build-id loaded): the file here is not the one loaded either.
    info = nullptr;
    err = rec->unreadable;
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

std::string FieldsKey(std::initializer_list<std::string_view> fields) {
  std::string key;
  for (std::string_view f : fields) (key += f) += '\0';
  return key;
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

std::string LoadedAt(const ProcessIndex& pi, const v1::Library& l, const char* lead) {
  if (pi.p->start_reason() == v1::START_SNAPSHOT) return "";
  return fmt::format("{}at +{:.1f} ms", lead, l.at_ms());
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

// The script's lines as they are now (a bounded read), or false.
bool ScriptLines(const std::string& path, std::vector<std::string>* lines) {
  constexpr std::uintmax_t kMaxScript = 8u << 20;
  std::error_code ec;
  if (path.empty() || path.front() != '/' || !std::filesystem::is_regular_file(path, ec) ||
      std::filesystem::file_size(path, ec) > kMaxScript || ec)
    return false;
  std::ifstream in(path, std::ios::binary);
  for (std::string l; std::getline(in, l);) lines->push_back(std::move(l));
  return !in.bad();
}

// "`what` (file:line)", or, where the statement is longer than the line, "the statement
// at file:first-last (holding `what`, line n)".
std::string StatementText(const Site& s, uint32_t first, uint32_t last, const std::string& cwd) {
  if (first == s.frame.line() && last == first)
    return fmt::format("`{}` ({})", s.what, render::PyFrameText(s.frame, cwd));
  v1::SourceLine at = s.frame;
  at.set_line(first);
  return fmt::format("the statement at {}-{} (holding `{}`, line {})", render::PyFrameText(at, cwd), last, s.what,
                     s.frame.line());
}

}  // namespace

// The fix moves whole statements: a line in a block (a `try:` body) moves with its block,
// at the indentation of the other line (py_statements.h). Where the script cannot be read
// now, the line itself; where no move keeps the script valid, no fix.
void AddSwapFix(const ProcessIndex& pi, const Obj& late, const Obj& early, FindingBuilder* f) {
  Site mine, theirs;
  if (!UserSite(late, &mine) || !UserSite(early, &theirs)) return;
  if (mine.frame.file() != theirs.frame.file() || mine.frame.line() <= theirs.frame.line()) return;
  const std::string cwd = pi.p->cwd();
  v1::LineMove move;
  const std::string& file = mine.frame.file();
  move.set_file(file.empty() || file.front() == '/' || cwd.empty() ? file : NormalPath(cwd + "/" + file));
  StatementMove m{mine.frame.line(), mine.frame.line(), theirs.frame.line(), theirs.frame.line()};
  if (std::vector<std::string> lines;
      ScriptLines(move.file(), &lines) && !MoveAbove(lines, mine.frame.line(), theirs.frame.line(), &m))
    return;
  move.set_line(m.first);
  move.set_last(m.last);
  move.set_above(m.above);
  f->Fix(mine.import && theirs.import ? v1::FIX_SWAP_IMPORTS : v1::FIX_SWAP_LOADS,
         text::Show("move {} above {}, so that {} is loaded before {}", StatementText(mine, m.first, m.last, cwd),
                    StatementText(theirs, m.above, m.above_last, cwd), BaseName(late.path), BaseName(early.path)),
         std::move(move));
}

std::vector<const Obj*> ProcessIndex::AliveAt(int64_t lmid, uint64_t seq) const {
  std::vector<const Obj*> out;
  for (const auto& [id, o] : objects)
    if (o.lmid == lmid && o.open_seq <= seq && seq < o.close_seq) out.push_back(&o);
  return out;
}

void ProcessIndex::Index() {
  by_request_.clear();
  by_soname.clear();
  by_request_.reserve(objects.own().size());
  // Inherited rows have no load (and their SONAMEs are the inherited table's).
  for (const auto& [id, o] : objects.own()) {
    if (o.load != nullptr && o.load->reason() == v1::LOAD_EXECUTABLE && exe == nullptr) exe = &o;
    if (o.load != nullptr) by_request_.push_back({o.requester, &o.load->requested_name(), &o});
    if (!o.soname->empty()) by_soname[o.soname].push_back(&o);
  }
  // Stable: of one (requester, name), the first in id order comes first.
  std::stable_sort(by_request_.begin(), by_request_.end(), [](const Request& a, const Request& b) {
    return a.requester != b.requester ? a.requester < b.requester : *a.name < *b.name;
  });
  for (size_t i = 0; i < by_request_.size() && i < UINT32_MAX; ++i)
    if (i == 0 || by_request_[i - 1].requester != by_request_[i].requester)
      if (auto it = objects.own().find(by_request_[i].requester); it != objects.own().end())
        it->second.requests = static_cast<uint32_t>(i);
}

const Obj* ProcessIndex::Requested(const Obj& requester, const std::string& name) const {
  auto before = [&](const Request& r) {
    return r.requester != requester.id ? r.requester < requester.id : *r.name < name;
  };
  // From where its requests begin, in steps that double (a churn's million requests:
  // a binary search over all of them misses the cache at every step), else over all.
  const size_t n = by_request_.size();
  size_t lo = 0, hi = n;
  if (requester.requests != UINT32_MAX) {
    // Everything below lo comes before; hi: the end, or an entry that does not.
    lo = hi = requester.requests;
    for (size_t step = 1; hi < n && before(by_request_[hi]); step *= 2) {
      lo = hi + 1;
      hi = std::min(n, hi + step);
    }
  }
  auto it = std::partition_point(by_request_.begin() + static_cast<std::ptrdiff_t>(lo),
                                 by_request_.begin() + static_cast<std::ptrdiff_t>(hi), before);
  return it != by_request_.end() && it->requester == requester.id && *it->name == name ? it->obj : nullptr;
}

const Obj* ProcessIndex::AliveWithSoname(const std::string& soname, int64_t lmid,
                                         uint64_t seq) const {
  static const std::vector<const Obj*> none;
  auto own = by_soname.find(soname);
  const std::vector<const Obj*>& mine = own != by_soname.end() ? own->second : none;
  const std::vector<const Obj*>* inherited = &none;
  if (const ObjectTable::Inherited* in = objects.inherited())
    if (auto it = in->by_soname.find(soname); it != in->by_soname.end()) inherited = &it->second;
  // Both in id order: the first alive of the two (an inherited one the image has a row
  // of its own for is that row's).
  auto alive = [&](const Obj* o) { return o->lmid == lmid && o->open_seq <= seq && seq < o->close_seq; };
  auto a = mine.begin();
  for (const Obj* o : *inherited) {
    for (; a != mine.end() && (*a)->id < o->id; ++a)
      if (alive(*a)) return *a;
    if (objects.own().count(o->id) == 0 && alive(o)) return o;
  }
  for (; a != mine.end(); ++a)
    if (alive(*a)) return *a;
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
  if (const Obj* r = pi.Requested(o, name)) return r;
  if (name.empty()) return nullptr;
  return pi.AliveWithSoname(name, o.lmid, o.open_seq);
}

const std::string& Str::Empty() {
  static const std::string empty;
  return empty;
}

v1::Load LoadFacts(const v1::Load& l) {
  v1::Load f = l;
  f.clear_object();
  f.clear_requester();
  f.clear_base();
  f.clear_rolled_back();
  // A reuse's object is read by id (the object table has the rest; `report`'s parts
  // carry the id alone).
  for (auto& r : *f.mutable_reused()) {
    const uint64_t id = r.object().id();
    r.clear_object();
    r.mutable_object()->set_id(id);
  }
  return f;
}

namespace {

// A hash of what LoadFacts keeps of a load, and whether two loads keep the same, read in
// place (a churn interns a million loads: no copy per load). The test
// Context.LoadsAlikeShareWhatThePassesRead places every field of the schema's Load.
struct FactsHasher {
  uint64_t h = 1469598103934665603ull;
  void Add(std::string_view s) { Add(std::hash<std::string_view>()(s)); }
  void Add(uint64_t v) { h = (h ^ v) * 1099511628211ull; }
};

uint64_t HashOfFacts(const v1::Load& l) {
  FactsHasher h;
  h.Add(uint64_t(l.reason()));
  h.Add(l.requested_name());
  for (const auto& c : l.tried()) {
    h.Add(c.path());
    h.Add(uint64_t(c.step()) << 32 | c.flag());
  }
  h.Add(l.dev());
  h.Add(l.ino());
  h.Add(l.build_id());
  for (const auto& n : l.needed()) h.Add(n);
  h.Add(l.rpath());
  h.Add(l.runpath());
  for (const auto& r : l.reused()) {
    h.Add(r.name());
    h.Add(r.object().id());
    h.Add(r.matched_by());
  }
  h.Add(l.has_python());
  h.Add(l.has_dlopen_mode() ? uint64_t{l.dlopen_mode()} | 1ull << 32 : 0);
  return h.h;
}

template <typename T, typename Eq>
bool SameList(const google::protobuf::RepeatedPtrField<T>& a, const google::protobuf::RepeatedPtrField<T>& b, Eq eq) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i)
    if (!eq(a[i], b[i])) return false;
  return true;
}

// f: a LoadFacts; l: any load.
bool SameFacts(const v1::Load& f, const v1::Load& l) {
  return f.reason() == l.reason() && f.requested_name() == l.requested_name() &&
         SameList(f.tried(), l.tried(),
                  [](const v1::Candidate& a, const v1::Candidate& b) {
                    return a.path() == b.path() && a.step() == b.step() && a.flag() == b.flag();
                  }) &&
         f.dev() == l.dev() && f.ino() == l.ino() && f.build_id() == l.build_id() &&
         SameList(f.needed(), l.needed(), std::equal_to<>()) && f.rpath() == l.rpath() &&
         f.runpath() == l.runpath() &&
         SameList(f.reused(), l.reused(),
                  [](const v1::Reuse& a, const v1::Reuse& b) {
                    return a.name() == b.name() && a.object().id() == b.object().id() &&
                           a.matched_by() == b.matched_by() && a.loaded_earlier() == b.loaded_earlier();
                  }) &&
         f.has_python() == l.has_python() &&
         (!f.has_python() || f.python().SerializeAsString() == l.python().SerializeAsString()) &&
         f.has_dlopen_mode() == l.has_dlopen_mode() && f.dlopen_mode() == l.dlopen_mode();
}

}  // namespace

// One process image as it arrives, whole or in parts: its load entries' facts (shared
// by the loads alike) with their times, the entries the passes walk, and the object
// table's rows, which become the index's objects once the image is complete.
class Context::ProcessReader {
 public:
  // keep: where the entries the passes walk are kept (a process of the streamed
  // timeline); nullptr: they stay where they are (the whole timeline's).
  ProcessReader(Context& ctx, v1::ProcessTimeline* keep) : ctx_(ctx), keep_(keep) {}

  void Part(const v1::ProcessTimeline& part) {
    const size_t part_loads = loads_.size();  // where this part's loads begin
    for (const v1::Entry& e : part.entries()) {
      const uint64_t index = seen_++;
      if (!any_ || e.offset_ns() > latest_.offset_ns()) {
        latest_.set_seq(e.seq());
        latest_.set_offset_ns(e.offset_ns());
        latest_.set_tid(e.tid());
      }
      any_ = true;
      if (e.has_load()) {
        if (first_dlopen_ == SIZE_MAX && e.load().reason() == v1::LOAD_DLOPEN) first_dlopen_ = kept_;
        loads_.push_back({index, ctx_.Facts(e.load()), e.offset_ns()});
      } else if (e.has_search() || e.has_failed_dlopen()) {
        ++kept_;
        if (keep_ != nullptr) *keep_->add_entries() = e;
      }
    }
    // The rows come in id order within a part; a part's rows that go below the
    // previous parts' (objects that lived long) are merged in, after the rows of the
    // same ids that came earlier.
    const size_t before = rows_.size();
    for (const v1::LoadedObject& lo : part.objects()) {
      auto& [id, o] = rows_.emplace_back(lo.object().id(), Obj{});
      o.id = id;
      o.path = Str(&ctx_.strings_.Intern(lo.object().path()));
      o.soname = Str(&ctx_.strings_.Intern(lo.object().soname()));
      o.lmid = lo.object().lmid();
      o.open_seq = lo.open_seq();
      if (lo.has_close_seq()) o.close_seq = lo.close_seq();
      o.requester = lo.requester();
      o.rolled_back = lo.rolled_back();
      if (lo.load_entry() == 0) continue;
      // Mostly a load of this part: searched among those first, not among all the
      // image's (a churn's million).
      const uint64_t entry = lo.load_entry() - 1;
      auto from = loads_.begin();
      if (part_loads < loads_.size() && loads_[part_loads].index <= entry)
        from += static_cast<std::ptrdiff_t>(part_loads);
      auto l = std::lower_bound(from, loads_.end(), entry, [](const LoadAt& a, uint64_t i) { return a.index < i; });
      if (l == loads_.end() || l->index != entry) continue;
      o.load = &l->kept->facts;
      o.dev = o.load->dev();
      o.ino = o.load->ino();
      o.build_id = l->kept->build_id;
      o.at_ms = static_cast<double>(l->offset_ns) / 1e6;
    }
    if (before > 0 && before < rows_.size() && rows_[before].first < rows_[before - 1].first)
      std::inplace_merge(rows_.begin(), rows_.begin() + static_cast<std::ptrdiff_t>(before), rows_.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
  }

  // The time of the entry of the latest offset (a bare entry: seq, offset, thread).
  const v1::Entry* Latest() const { return any_ ? &latest_ : nullptr; }

  // p: the image's timeline (the complete part's fields, or the whole process).
  ProcessIndex Complete(const v1::ProcessTimeline* p) {
    ProcessIndex pi;
    pi.p = p;
    pi.entries.reserve(kept_);
    for (const v1::Entry& e : p->entries())
      if (e.has_search() || e.has_failed_dlopen()) pi.entries.push_back(&e);
    pi.before_first_dlopen = first_dlopen_;
    // One row per id: an id's later row (its object opened again, or closed again after
    // lost events) is the table's, as in the whole timeline.
    size_t n = 0;
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (n > 0 && rows_[n - 1].first == rows_[i].first)
        rows_[n - 1] = rows_[i];
      else
        rows_[n++] = rows_[i];
    }
    rows_.resize(n);
    if (p->inherited_objects() != 0) pi.objects.set_inherited(ctx_.InheritedTable(p->inherited_objects()));
    const size_t first = pi.objects.InheritedRows().size();
    for (size_t i = 0; i < n; ++i) rows_[i].second.index = static_cast<uint32_t>(first + i);
    pi.objects.own().adopt_sequence(boost::container::ordered_unique_range, std::move(rows_));
    return pi;
  }

 private:
  struct LoadAt {
    uint64_t index;  // among all the image's entries
    const KeptLoad* kept;
    uint64_t offset_ns;
  };
  Context& ctx_;
  v1::ProcessTimeline* keep_;
  uint64_t seen_ = 0;
  std::deque<LoadAt> loads_;  // in entry order
  size_t kept_ = 0;  // entries the passes walk, so far
  bool any_ = false;
  v1::Entry latest_;
  size_t first_dlopen_ = SIZE_MAX;
  ObjectTable::Rows::sequence_type rows_;
};

std::shared_ptr<const ObjectTable::Inherited> Context::InheritedTable(uint32_t table) {
  auto& in = inherited_[table];
  if (in != nullptr || table == 0 || table > static_cast<uint32_t>(t_.inherited_size())) return in;
  auto made = std::make_shared<ObjectTable::Inherited>();
  ObjectTable::Rows::sequence_type rows;
  for (const v1::LoadedObject& lo : t_.inherited(static_cast<int>(table - 1)).objects()) {
    if (!rows.empty() && rows.back().first >= lo.object().id()) continue;  // in id order, once
    auto& [id, o] = rows.emplace_back(lo.object().id(), Obj{});
    o.id = id;
    o.path = Str(&strings_.Intern(lo.object().path()));
    o.soname = Str(&strings_.Intern(lo.object().soname()));
    o.lmid = lo.object().lmid();
    o.open_seq = lo.open_seq();
    if (lo.has_close_seq()) o.close_seq = lo.close_seq();
    o.index = static_cast<uint32_t>(rows.size() - 1);
  }
  made->rows.adopt_sequence(boost::container::ordered_unique_range, std::move(rows));
  for (const auto& [id, o] : made->rows)
    if (!o.soname->empty()) made->by_soname[o.soname].push_back(&o);
  in = std::move(made);
  return in;
}

const Context::KeptLoad* Context::Facts(const v1::Load& l) {
  auto& alike = load_facts_[HashOfFacts(l)];
  for (const auto& k : alike)
    if (SameFacts(k->facts, l)) return k.get();
  auto kept = std::make_unique<KeptLoad>(KeptLoad{LoadFacts(l), Str(&strings_.Intern(l.build_id()))});
  return alike.emplace_back(std::move(kept)).get();
}

const elf::ElfInfo* Context::File(const Str& path) {
  auto [it, fresh] = file_of_.try_emplace(&path.str());
  if (fresh) it->second = files_->Get(path);
  return it->second;
}

void Context::Init() {
  cache_status_ = cache_.Load();
  struct stat st;
  multiarch_ = stat("/lib/x86_64-linux-gnu", &st) == 0;
}

Context::Context(const v1::Timeline& t, const elf::TraceFacts* facts, Files* files)
    : t_(t), files_(files != nullptr ? files : &own_files_) {
  if (facts != nullptr) files_->set_trace_facts(facts);
  Init();
  for (const auto& p : t.processes()) {
    ProcessReader r(*this, nullptr);
    r.Part(p);
    AddProcess(r.Complete(&p));
  }
}

Context::Context(v1::Timeline* t, const elf::TraceFacts* facts, Files* files)
    : t_(*t), parts_of_(t), files_(files != nullptr ? files : &own_files_) {
  if (facts != nullptr) files_->set_trace_facts(facts);
  Init();
}

Context::~Context() = default;

const v1::Owner* Context::OwnerOf(const std::string& path) {
  if (!owners_indexed_) {
    owners_indexed_ = true;
    for (const auto& o : t_.owners())
      for (const auto& p : o.paths()) {
        owners_[p] = &o;
        owners_.emplace(NormalPath(p), &o);
      }
  }
  auto it = owners_.find(path);
  if (it == owners_.end()) it = owners_.find(NormalPath(path));
  return it == owners_.end() ? nullptr : it->second;
}

bool Context::AddPart(const v1::ProcessTimeline& part, bool complete) {
  if (reading_ == nullptr) reading_ = std::make_unique<ProcessReader>(*this, parts_of_->add_processes());
  v1::ProcessTimeline* kept = parts_of_->mutable_processes(parts_of_->processes_size() - 1);
  reading_->Part(part);
  if (!complete) return true;
  // The complete part's fields, around the entries kept.
  // (Swapped, not copied: on the timeline's arena, if it has one.)
  google::protobuf::Arena* arena = kept->GetArena();
  auto* entries = google::protobuf::Arena::Create<google::protobuf::RepeatedPtrField<v1::Entry>>(arena);
  entries->Swap(kept->mutable_entries());
  kept->CopyFrom(part);
  kept->clear_entries();
  kept->clear_objects();
  kept->mutable_entries()->Swap(entries);
  if (arena == nullptr) delete entries;
  // JUnit's duration of a process is its entries' latest offset: when that is a load's
  // or an unload's, the kept entries end with its time.
  if (const v1::Entry* latest = reading_->Latest()) {
    bool later = true;
    for (const v1::Entry& e : kept->entries()) later &= e.offset_ns() < latest->offset_ns();
    if (later) *kept->add_entries() = *latest;
  }
  AddProcess(reading_->Complete(kept));
  reading_.reset();
  return true;
}

void Context::AddProcess(ProcessIndex pi) {
  const v1::ProcessTimeline& p = *pi.p;
  pi.env.subdirs.assign(p.hwcaps_subdirs().begin(), p.hwcaps_subdirs().end());
  const std::vector<std::string> learnt_defaults(p.default_dirs().begin(), p.default_dirs().end());
  // Relative elements, and empty ones (the current directory), are the start's cwd's.
  pi.env.cwd = p.cwd();
  auto env = p.env().find("LD_LIBRARY_PATH");
  if (env != p.env().end())
    for (const auto& dir : loader::SplitSearchPath(env->second))
      pi.env.ld_library_path.push_back(
          dir.empty() || dir.front() == '/' || p.cwd().empty() ? dir : NormalPath(p.cwd() + "/" + dir));
  pi.env.cache = &cache_;
  pi.env.idents = &idents_;
  pi.env.default_dirs = learnt_defaults;
  if (pi.env.default_dirs.empty())
    pi.env.default_dirs = multiarch_ ? std::vector<std::string>{"/lib/x86_64-linux-gnu",
                                                                "/usr/lib/x86_64-linux-gnu",
                                                                "/lib", "/usr/lib"}
                                     : std::vector<std::string>{"/lib64", "/usr/lib64"};
  if (!multiarch_) pi.env.lib = "lib64";
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

std::string Context::VersionOf(const std::string& path, const std::string& soname) {
  auto it = versions_.find(path);
  if (it != versions_.end()) return it->second;
  std::string v;
  const std::string family = Family(soname.empty() ? path : soname);
  if (family == "libnccl") {
    const std::string s = files_->FindString(path, "NCCL version ");
    if (!s.empty()) v = "NCCL " + s.substr(std::string("NCCL version ").size());
    // The string is printed as is by NCCL ("NCCL version 2.28.3 compiled with CUDA
    // 13.0\n" in Ubuntu's build): the version without its line break.
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
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
    case v1::LOAD_IN_LINK_MAP:
      return "after start-up (a dlopen or one of its dependencies: a snapshot does not tell)";
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
  if (pi.p->start_reason() != v1::START_SNAPSHOT) l.set_at_ms(o.at_ms);  // when a snapshot read it, not when loaded
  if (o.load != nullptr) l.set_found_by(render::FoundByWord(*o.load));
  if (o.load != nullptr && o.load->has_python()) *l.mutable_python() = o.load->python();
  return l;
}

std::vector<const Obj*> Context::DistinctFiles(std::vector<const Obj*> objs) {
  SortUnlessSorted(objs, LoadedBefore);
  // An object is a kept one's file when it shares one of its keys (the recorded device
  // and inode, the path, the device and inode on disk: what SameFile compares), found by
  // hashing, not by comparing it with each kept one: thousands of copies of a SONAME stay
  // linear.
  const auto pair_hash = [](const std::pair<uint64_t, uint64_t>& p) {
    return std::hash<uint64_t>()(p.first * 0x9e3779b97f4a7c15ull ^ p.second);
  };
  std::unordered_set<std::pair<uint64_t, uint64_t>, decltype(pair_hash)> recorded(16, pair_hash),
      on_disk(16, pair_hash);
  std::unordered_set<std::string_view> paths;
  std::vector<const Obj*> out;
  for (const Obj* o : objs) {
    const std::string& path = o->path;
    const bool recorded_same = o->dev != 0 && recorded.count({o->dev, o->ino}) != 0;
    if (recorded_same || paths.count(path) != 0) continue;
    const Identity& id = IdentityOf(path);
    if (id.known && on_disk.count({id.dev, id.ino}) != 0) continue;
    out.push_back(o);
    if (o->dev != 0) recorded.insert({o->dev, o->ino});
    paths.insert(path);
    if (id.known) on_disk.insert({id.dev, id.ino});
  }
  return out;
}

std::vector<const Obj*> AliveTogether(const std::vector<const Obj*>& files) {
  // Sorted by open: the files opened before a's close are a prefix; a overlaps one of
  // them other than itself when the latest close among them (or, if that is a's, the
  // second latest) comes after a's open. A sweep, not every pair.
  const size_t n = files.size();
  std::vector<uint32_t> by_open(n);
  for (uint32_t i = 0; i < n; ++i) by_open[i] = i;
  std::stable_sort(by_open.begin(), by_open.end(),
                   [&](uint32_t a, uint32_t b) { return files[a]->open_seq < files[b]->open_seq; });
  std::vector<uint64_t> opens(n);
  // Of the first i+1 files by open: the latest close, whose it is, and the second latest.
  std::vector<uint64_t> first(n), second(n);
  std::vector<uint32_t> first_of(n);
  for (size_t i = 0; i < n; ++i) {
    const Obj* f = files[by_open[i]];
    opens[i] = f->open_seq;
    uint64_t a = i > 0 ? first[i - 1] : 0, b = i > 0 ? second[i - 1] : 0;
    uint32_t who = i > 0 ? first_of[i - 1] : UINT32_MAX;
    if (i == 0 || f->close_seq > a) {
      b = a;
      a = f->close_seq;
      who = by_open[i];
    } else if (f->close_seq > b) {
      b = f->close_seq;
    }
    first[i] = a;
    second[i] = b;
    first_of[i] = who;
  }
  std::vector<const Obj*> out;
  for (uint32_t ai = 0; ai < n; ++ai) {
    const Obj* a = files[ai];
    const size_t prefix = std::lower_bound(opens.begin(), opens.end(), a->close_seq) - opens.begin();
    if (prefix == 0) continue;
    // (second is 0 where the prefix has one file: no close comes after an open then.)
    const uint64_t latest = first_of[prefix - 1] == ai ? second[prefix - 1] : first[prefix - 1];
    if (latest > a->open_seq) out.push_back(a);
  }
  return out;
}

const Context::Identity& Context::IdentityOf(const std::string& path) {
  const auto [it, fresh] = identities_.try_emplace(path);
  struct stat st;
  if (fresh && stat(path.c_str(), &st) == 0) it->second = {true, st.st_dev, st.st_ino};
  return it->second;
}

bool Context::SameFile(const std::string& a, const std::string& b) {
  if (a == b) return true;
  const Identity& ia = IdentityOf(a);
  if (!ia.known) return false;
  const Identity& ib = IdentityOf(b);
  return ib.known && ia.dev == ib.dev && ia.ino == ib.ino;
}

}  // namespace ldscope::analysis
