// See timeline.h. The reconstruction follows docs/LOADER.md: searches are reported
// candidate by candidate before open(); success shows only as the objopen that
// follows; NEEDED names that match a loaded object's name or SONAME cause no search.
#include "model/timeline.h"

#include "loader/search.h"
#include "model/python.h"
#include "model/search_dirs.h"
#include "model/streams.h"
#include "text/escape.h"
#include "text/strings.h"

#include <link.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <google/protobuf/arena.h>

#include <boost/container/flat_map.hpp>
#include <boost/container/flat_set.hpp>
#include <fmt/format.h>

namespace ldscope::model {
namespace {

using boost::container::flat_map;
using streams::Image;
using streams::PyEvents;
using streams::Streams;

// The byte strings the object table repeats (paths, SONAMEs, NEEDED lists: a churn of
// dlopens loads the same few files millions of times), each kept once and named by its
// number. One pool per BuildTimeline call: fork children inherit their parent's objects.
class Names {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t Id(const std::string& s) { return strings_.Id(s); }
  const std::string& operator[](uint32_t id) const { return id == kNone ? empty_ : strings_[id]; }
  // A NEEDED list, by number.
  template <class Range>
  uint32_t ListId(const Range& names) {
    std::vector<uint32_t> ids;
    for (const auto& n : names) ids.push_back(Id(n));
    auto it = list_ids_.find(ids);
    if (it != list_ids_.end()) return it->second;
    lists_.push_back(ids);
    const uint32_t id = static_cast<uint32_t>(lists_.size() - 1);
    list_ids_.emplace(std::move(ids), id);
    return id;
  }
  const std::vector<uint32_t>& List(uint32_t id) const { return lists_[id]; }

 private:
  text::StringPool strings_;
  std::deque<std::vector<uint32_t>> lists_;
  std::map<std::vector<uint32_t>, uint32_t> list_ids_;
  const std::string empty_;
};

// An object of the image as the model reads it: of its ObjOpen, only what is read later
// (the model keeps every object an image ever had, a churn of dlopens makes millions,
// unless it hands the rows over and no fork child inherits: see HandOver), its strings
// as Names numbers.
struct Obj {
  uint32_t path = Names::kNone;      // made absolute
  uint32_t soname = Names::kNone;
  uint32_t needed = 0;               // a Names list (0: the empty list)
  uint32_t alias = Names::kNone;     // the name it was requested by
  int64_t lmid = 0;
  uint64_t batch = 0;
  int64_t load_entry = -1;           // index into all the image's entries, -1 if inherited
  uint64_t end_seq = 0;              // the seq of the Unload or FailedDlopen entry that ended it
  // For fork children: the seq of its last open (0: inherited, open from the start) and
  // of its last close, when there was one.
  uint64_t open_seq = 0, close_seq = 0;
  // Of its load entry, for the object table: the entry's seq, the requester, how it was
  // found.
  uint64_t load_seq = 0, requester = 0;
  v1::CandidateStep found_by = v1::STEP_UNKNOWN;
  bool has_found_by = false;
  bool rolled_back = false;
  bool has_runpath = false;
  bool is_main = false;
  bool is_open = true;
  bool inherited = false;            // over fork, from the parent image
  bool ended = false;                // an Unload or FailedDlopen entry ended it
  bool has_open_seq = false, has_close_seq = false;
  bool row_given = false;            // its object-table row went out with a part
};

// The objects a fork child inherits: its parent's open at the fork, as the child's
// (inherited, open from the start), with the index of their names; shared by every child
// forked at that point of that parent (2,000 children of a 2,000-object image hold one
// table, not 2,000 copies). table: its 1-based index in Timeline.inherited.
struct Inherited {
  flat_map<uint64_t, Obj> objects;
  std::unordered_map<uint32_t, boost::container::flat_set<uint64_t>> by_name;
  uint32_t table = 0;
};

struct PendingSearch {
  bool active = false;
  std::string name;
  uint64_t requester = 0;
  std::vector<v1::Candidate> tried;
  uint64_t seq = 0;
  uint64_t mono_ns = 0;
  uint32_t tid = 0;
  bool interrupted = false;  // events after it were lost: its outcome is not known
  bool truncated = false;  // one of its events had a string cut
};

// What an entry needs of an event (the events are decoded one at a time: none is kept).
struct EventWhen {
  uint64_t seq = 0, mono_ns = 0;
  uint32_t tid = 0;
};

struct CloseGroup {
  std::vector<uint64_t> ids;
  std::vector<EventWhen> events;
  bool unrelocated = false;
};

// A handed-over image's timeline whose entries and rows live on the builder's arena
// (RepeatedPtrField::UnsafeArenaAddAllocated): it holds them without owning them, and
// lets go of them (without touching them) before it is cleared or deleted.
struct PartsOnArena {
  static void Release(v1::ProcessTimeline* p) {
    p->mutable_entries()->UnsafeArenaExtractSubrange(0, p->entries_size(), nullptr);
    p->mutable_objects()->UnsafeArenaExtractSubrange(0, p->objects_size(), nullptr);
  }
  void operator()(v1::ProcessTimeline* p) const {
    Release(p);
    delete p;
  }
};

// Builds one process image's timeline from its events (sorted by seq).
class ProcessBuilder {
 public:
  // py: the image's Python attribution, applied to each entry as it is made (used
  // until Finish). final_entries: when set, the entries are handed to it as soon as no
  // later event can change them (see BuildTimeline), then dropped, and no object table
  // is made; with_rows: the object table's rows go with the entries, each once it is
  // final; has_children: fork children will inherit from this image (Inherit reads every
  // object it had).
  // parts_arena: with final_entries, where the entries and rows are made (a churn hands
  // over and drops millions: their messages are then neither allocated nor freed one by
  // one); out holds them without owning them (see PartsOnArena).
  ProcessBuilder(v1::ProcessTimeline* out, uint64_t image_start_ns, PyAttribution* py, Names* names,
                 const std::function<bool(const v1::ProcessTimeline&)>* final_entries = nullptr,
                 bool with_rows = false, bool has_children = true,
                 google::protobuf::Arena* parts_arena = nullptr)
      : out_(out), start_ns_(image_start_ns), py_(py), names_(*names), final_entries_(final_entries),
        parts_arena_(final_entries != nullptr ? parts_arena : nullptr),
        with_rows_(final_entries != nullptr && with_rows), forget_ended_(final_entries != nullptr && !has_children) {
    names_.ListId(std::vector<std::string>{});  // list 0: no NEEDED entries
  }

  // The objects a child forked at before_seq inherits from this image (final).
  std::shared_ptr<Inherited> Inheritance(uint64_t before_seq) const {
    auto in = std::make_shared<Inherited>();
    ForEachObject([&](uint64_t id, const Obj& o) {
      if (!o.has_open_seq || o.open_seq >= before_seq) return;
      if (o.has_close_seq && o.close_seq < before_seq) return;
      Obj copy = o;
      copy.is_open = true;
      copy.load_entry = -1;
      copy.batch = 0;  // loaded before this process image's first operation
      copy.inherited = true;
      copy.ended = false;
      // Open here from the start: a fork of this process inherits it in turn.
      copy.has_open_seq = true;
      copy.open_seq = 0;
      copy.has_close_seq = false;
      copy.close_seq = 0;
      copy.row_given = false;
      in->objects.emplace_hint(in->objects.end(), id, copy);
      for (uint32_t n : {copy.alias, copy.soname, copy.path})
        if (n != Names::kNone) in->by_name[n].insert(id);
    });
    return in;
  }

  // The image is a fork child that inherited these objects (read, never changed: what
  // the child changes of one of them is its own copy in objects_).
  void Inherit(std::shared_ptr<const Inherited> in) {
    base_ = std::move(in);
    out_->set_inherited_objects(base_->table);
  }

  // The table of the image's objects: its own and, for a fork child, the inherited
  // ones it did not change, in id order.
  template <class F>
  void ForEachObject(F f) const {
    auto own = objects_.begin();
    auto put_own_before = [&](uint64_t id) {
      for (; own != objects_.end() && own->first < id; ++own) f(own->first, own->second);
    };
    if (base_ != nullptr)
      for (const auto& [id, o] : base_->objects) {
        put_own_before(id);
        if (own != objects_.end() && own->first == id) continue;  // the child's copy
        f(id, o);
      }
    for (; own != objects_.end(); ++own) f(own->first, own->second);
  }

  void Add(const v1::Event& e) {
    // A loss between the previous event received and this one (a sequence gap, or a
    // higher drop count: lock-timeout drops take no sequence number) hides whatever the
    // pending search led to.
    const bool lost_before = e.seq() > next_seq_ || e.dropped() > dropped_seen_;
    if (lost_before) {
      lossy_ = true;
      if (pending_.active) pending_.interrupted = true;
    }
    next_seq_ = std::max(next_seq_, e.seq() + 1);
    dropped_seen_ = std::max(dropped_seen_, e.dropped());
    // Closes followed by CONSISTENT are one finished dlclose, unless what comes next
    // is the exit (exit: DELETE, closes, CONSISTENT, then our exit event).
    if (closes_sealed_ && e.body_case() != v1::Event::kExit) {
      closes_sealed_ = false;
      FlushCloses(false);
    }
    switch (e.body_case()) {
      case v1::Event::kSearch: OnSearch(e); break;
      case v1::Event::kObjopen: OnOpen(e); break;
      case v1::Event::kObjclose: OnClose(e); break;
      case v1::Event::kActivity: OnActivity(e); break;
      case v1::Event::kPreinit:
        FlushSearch();
        startup_done_ = true;
        break;
      case v1::Event::kSnapshot:
        *out_->mutable_snapshot() = e.snapshot();
        break;
      case v1::Event::kExit:
        FlushSearch();
        FlushCloses(/*at_exit=*/true);
        closes_sealed_ = false;
        out_->set_exited(true);
        break;
      default: break;
    }
  }

  // The parts' receiver said to stop (BuildTimeline then stops).
  bool stopped() const { return stopped_; }

  // cut: the stream was still connected when recording stopped.
  void Finish(bool cut) {
    // Without the exit event, a search last in a stream that lost events (or was cut off)
    // may have been followed by a load that never arrived.
    if (pending_.active && !out_->exited() && (lossy_ || cut)) pending_.interrupted = true;
    FlushSearch();
    FlushCloses(true);  // closes that end the stream are the exit's
    if (batch_open_) EndBatch();
    for (uint64_t id : open_) Ref(id, out_->add_loaded_at_end());
    if (base_ != nullptr) {
      uint32_t untouched = 0;
      for (const auto& [id, o] : base_->objects) untouched += objects_.count(id) == 0;
      out_->set_inherited_open_at_end(untouched);
    }
    for (const auto& e : out_->entries()) dirs_.Add(e);
    dirs_.Set(out_);
    if (final_entries_ == nullptr || with_rows_) EmitObjects();
  }

 private:
  // The object of id, unless it ended: an object that was unloaded (or rolled back) is
  // gone, and a later event that names its id (a damaged trace's) does not reach it.
  // (With rows, the builder forgets ended objects once their rows are out: the same
  // answer either way.)
  const Obj* Live(uint64_t id) const {
    const Obj* o = Find(id);
    return o != nullptr && !o->ended ? o : nullptr;
  }

  // The object of id: the image's own, else the inherited one (nullptr: none).
  const Obj* Find(uint64_t id) const {
    if (auto it = objects_.find(id); it != objects_.end()) return &it->second;
    if (base_ != nullptr)
      if (auto it = base_->objects.find(id); it != base_->objects.end()) return &it->second;
    return nullptr;
  }

  // The object of id to change: an inherited one is copied into the image's own first
  // (open, as it was inherited); an unknown id gets a new one.
  Obj& Mut(uint64_t id) {
    if (auto it = objects_.find(id); it != objects_.end()) return it->second;
    if (base_ != nullptr)
      if (auto it = base_->objects.find(id); it != base_->objects.end()) {
        Obj& o = objects_[id] = it->second;
        Opened(id, o);
        return o;
      }
    return objects_[id];
  }

  // f(id) over the open objects in id order (the inherited ones the image did not
  // change, and its own), until f returns true; name: only those of that name (a Names
  // id: requested name, SONAME or path).
  template <class F>
  void ForEachOpen(F f, uint32_t name = Names::kNone) const {
    static const boost::container::flat_set<uint64_t> none;
    const boost::container::flat_set<uint64_t>* own = &open_;
    if (name != Names::kNone) {
      auto it = open_by_name_.find(name);
      own = it != open_by_name_.end() ? &it->second : &none;
    }
    auto a = own->begin();
    // An inherited object, after the image's own before it; true: stop.
    auto inherited = [&](uint64_t id) {
      for (; a != own->end() && *a < id; ++a)
        if (f(*a)) return true;
      return objects_.count(id) == 0 && f(id);  // else the image's copy (in own if open)
    };
    if (base_ != nullptr) {
      if (name == Names::kNone) {
        for (const auto& [id, o] : base_->objects)
          if (inherited(id)) return;
      } else if (auto it = base_->by_name.find(name); it != base_->by_name.end()) {
        for (uint64_t id : it->second)
          if (inherited(id)) return;
      }
    }
    for (; a != own->end(); ++a)
      if (f(*a)) return;
  }

  void Fill(const Obj& o, v1::ObjectRef* r) const {
    r->set_path(names_[o.path]);
    r->set_soname(names_[o.soname]);
    r->set_lmid(o.lmid);
  }

  // The reference to object id, made in place (*r is a new message): its id, and what
  // the object says if it is live.
  void Ref(uint64_t id, v1::ObjectRef* r) const {
    r->set_id(id);
    if (const Obj* o = Live(id)) Fill(*o, r);
  }

  // A reference in a load, an unload or a reuse: `report` (with_rows_) reads those by id
  // alone, its object table having the rest, so they carry the id only there, not the
  // object's path and SONAME copied once more for each of a churn's millions.
  void RefById(uint64_t id, v1::ObjectRef* r) const {
    if (with_rows_)
      r->set_id(id);
    else
      Ref(id, r);
  }

  v1::Load* LoadOf(const Obj& o) {
    return out_->mutable_entries(static_cast<int>(o.load_entry - dropped_entries_))->mutable_load();
  }

  // A new message at the end of one of out_'s lists: with parts_arena_, made there and
  // held by the list without being owned (PartsOnArena).
  template <class T>
  T* Add(google::protobuf::RepeatedPtrField<T>* list) {
    if (parts_arena_ == nullptr) return list->Add();
    T* m = google::protobuf::Arena::CreateMessage<T>(parts_arena_);
    list->UnsafeArenaAddAllocated(m);
    return m;
  }

  // The object table's row of object id (timeline.proto's LoadedObject).
  void Row(uint64_t id, const Obj& o) { Row(id, o, names_, Add(out_->mutable_objects())); }

 public:
  static void Row(uint64_t id, const Obj& o, const Names& names, v1::LoadedObject* lo) {
    lo->mutable_object()->set_id(id);
    lo->mutable_object()->set_path(names[o.path]);
    lo->mutable_object()->set_soname(names[o.soname]);
    lo->mutable_object()->set_lmid(o.lmid);
    lo->set_inherited(o.inherited);
    if (o.ended) lo->set_close_seq(o.end_seq);
    if (o.load_entry < 0) return;
    lo->set_load_entry(static_cast<uint32_t>(o.load_entry + 1));
    lo->set_open_seq(o.load_seq);
    lo->set_requester(o.requester);
    lo->set_rolled_back(o.rolled_back);
    if (o.has_found_by) lo->set_found_by(o.found_by);
  }

 private:
  // The object table, in id order (with rows: the rows not given yet).
  void EmitObjects() {
    for (auto& [id, o] : objects_) {
      if (o.row_given) continue;
      Row(id, o);
      o.row_given = with_rows_;
    }
  }

  // Every entry made so far is final (a later event changes only entries of objects of
  // a batch still open, or rolled back by a dlopen that has not ended): to
  // final_entries_, then dropped. With rows, so are the rows of the objects that ended:
  // only a close changes an ended object's row (a close group marks its own batch's
  // loads rolled back), and a close puts it back on ended_.
  void HandOver() {
    if (final_entries_ == nullptr || out_->entries_size() == 0) return;
    if (with_rows_) {
      std::sort(ended_.begin(), ended_.end());
      ended_.erase(std::unique(ended_.begin(), ended_.end()), ended_.end());
      for (uint64_t id : ended_) {
        auto it = objects_.find(id);
        // Opened again since (the id reused): its row goes once that object ends.
        if (it == objects_.end() || it->second.is_open || it->second.row_given) continue;
        Row(id, it->second);
        it->second.row_given = true;
      }
    }
    stopped_ = !(*final_entries_)(*out_);
    for (const auto& e : out_->entries()) dirs_.Add(e);
    dropped_entries_ += out_->entries_size();
    if (parts_arena_ != nullptr) {
      // Dropped with the arena at once (nothing else points there; a store::ReusedArena,
      // so this frees only what this part's strings took, as a Clear of them would.
      // Resetting only after thousands of entries was slower: glibc's malloc then sorts
      // the thousands of blocks freed at once.)
      PartsOnArena::Release(out_);
      parts_arena_->Reset();
    } else {
      out_->mutable_entries()->Clear();
      out_->mutable_objects()->Clear();
    }
    // Without fork children to inherit from it, an object that ended is not read again
    // (Live) once its row is out, or when no table is made (`show`): forgotten, with its
    // searches, so that a churn's builder holds only what is open.
    if (forget_ended_)
      for (uint64_t id : ended_) {
        auto it = objects_.find(id);
        if (it == objects_.end() || !it->second.ended || (with_rows_ && !it->second.row_given)) continue;
        // The copy of an inherited object stays: without it, the inherited one would be
        // read as open again.
        if (base_ != nullptr && base_->objects.count(id) != 0) continue;
        objects_.erase(it);
        searched_.erase(searched_.lower_bound({id, 0}), searched_.lower_bound({id + 1, 0}));
      }
    ended_.clear();
  }

  int64_t EntryCount() const { return dropped_entries_ + out_->entries_size(); }

  v1::Entry* NewEntry(uint64_t seq, uint64_t mono_ns, uint32_t tid) {
    v1::Entry* en = Add(out_->mutable_entries());
    en->set_seq(seq);
    en->set_offset_ns(mono_ns >= start_ns_ ? mono_ns - start_ns_ : 0);
    en->set_tid(tid);
    return en;
  }

  void OnSearch(const v1::Event& e) {
    const auto& s = e.search();
    if ((s.flag() & LA_SER_ORIG) != 0 || !pending_.active) {
      FlushSearch();
      pending_.truncated = e.truncated();
      pending_.active = true;
      pending_.interrupted = false;
      pending_.name = s.name().empty() ? s.candidate() : s.name();
      pending_.requester = s.requester();
      pending_.tried.clear();
      pending_.seq = e.seq();
      pending_.mono_ns = e.mono_ns();
      pending_.tid = e.tid();
      searched_.insert({s.requester(), names_.Id(pending_.name)});
      if ((s.flag() & LA_SER_ORIG) != 0) {
        // A name with '/' is opened as given: the ORIG call is its only candidate.
        if (pending_.name.find('/') != std::string::npos) {
          v1::Candidate c;
          c.set_path(pending_.name);
          c.set_step(v1::STEP_AS_GIVEN);
          pending_.tried.push_back(c);
        }
        return;
      }
    }
    pending_.truncated |= e.truncated();
    const Obj* req = Live(s.requester());
    const bool has_runpath = req != nullptr && req->has_runpath;
    v1::Candidate c;
    c.set_path(s.candidate());
    c.set_step(StepOf(s.flag(), has_runpath));
    if (c.step() == v1::STEP_UNKNOWN) c.set_flag(s.flag());
    pending_.tried.push_back(c);
  }

  // An object opened by a relative name ("./x.so", a relative LD_LIBRARY_PATH entry) is
  // the file under the working directory of that moment (sent with the ObjOpen; else
  // the one at the start), so that everything after reads the right file.
  std::string Absolute(const v1::ObjOpen& o) const {
    const std::string& path = o.path();
    if (path.empty() || path.front() == '/' || o.is_vdso()) return path;
    const std::string& cwd = o.cwd().empty() ? out_->cwd() : o.cwd();
    if (cwd.empty()) return path;
    return std::filesystem::path(cwd + "/" + path).lexically_normal().string();
  }

  v1::LoadReason ReasonFor(const std::string& name, uint64_t requester) const {
    if (const Obj* req = Live(requester)) {
      for (uint32_t n : names_.List(req->needed))
        if (names_[n] == name) return v1::LOAD_NEEDED;
      if (req->is_main && !startup_done_) {
        auto env = out_->env().find("LD_PRELOAD");
        if (env != out_->env().end()) {
          for (const auto& p : loader::SplitPath(env->second, ": \t"))
            if (p == name) return v1::LOAD_PRELOAD;
        }
      }
    }
    return v1::LOAD_DLOPEN;
  }

  // The load of the object the pending search found: the search's name, requester and
  // candidates; the requester's path for the Python attribution.
  void FromSearch(v1::Entry* en, v1::Load* l, Obj* obj, std::string_view* requester_path) {
    l->set_requested_name(pending_.name);
    RefById(pending_.requester, l->mutable_requester());
    if (const Obj* r = Live(pending_.requester)) *requester_path = names_[r->path];
    l->set_reason(ReasonFor(pending_.name, pending_.requester));
    for (const auto& c : pending_.tried) *l->add_tried() = c;
    obj->alias = names_.Id(pending_.name);
    obj->requester = pending_.requester;
    if (!pending_.tried.empty()) {
      obj->has_found_by = true;
      obj->found_by = pending_.tried.back().step();
    }
    // Report the whole search at the time it began.
    en->set_seq(pending_.seq);
    en->set_offset_ns(pending_.mono_ns >= start_ns_ ? pending_.mono_ns - start_ns_ : 0);
    pending_.active = false;
  }

  // A running process's link map: no search was seen. A start-up object's entry is known
  // from the list's order (ObjOpen.requested_by); any other's reason is not.
  void FromLinkMap(const v1::ObjOpen& o, v1::Load* l, Obj* obj) {
    if (o.requested_by() != 0) {
      l->set_requested_name(o.requested());
      RefById(o.requested_by(), l->mutable_requester());
      l->set_reason(o.preload() ? v1::LOAD_PRELOAD : v1::LOAD_NEEDED);
      obj->alias = names_.Id(o.requested());
      obj->requester = o.requested_by();
    } else {
      l->set_reason(v1::LOAD_IN_LINK_MAP);
    }
  }

  void OnOpen(const v1::Event& e) {
    FlushCloses(false);
    const auto& o = e.objopen();
    Obj obj;
    obj.path = names_.Id(Absolute(o));
    obj.soname = names_.Id(o.soname());
    obj.lmid = o.lmid();
    obj.needed = names_.ListId(o.needed());
    obj.has_runpath = !o.runpath().empty();
    obj.is_main = o.is_main();
    obj.batch = batch_;
    v1::Entry* en = NewEntry(e.seq(), e.mono_ns(), e.tid());
    en->set_truncated(e.truncated() || (pending_.active && pending_.truncated));
    v1::Load* l = en->mutable_load();
    std::string_view requester_path;  // for the Python attribution
    if (o.is_main()) {
      l->set_reason(v1::LOAD_EXECUTABLE);
    } else if (o.is_ldso()) {
      l->set_reason(v1::LOAD_INTERPRETER);
    } else if (o.is_vdso()) {
      l->set_reason(v1::LOAD_VDSO);
    } else if (pending_.active) {
      FromSearch(en, l, &obj, &requester_path);
    } else if (out_->start_reason() == v1::START_SNAPSHOT) {
      FromLinkMap(o, l, &obj);
    } else {
      // ld.so reports no search for a dlmopen into a new namespace (the caller is in
      // another namespace): the object's name is what was asked for.
      l->set_requested_name(o.path());
      l->set_reason(v1::LOAD_DLOPEN);
      obj.alias = names_.Id(o.path());
    }
    l->set_base(o.base());
    l->set_dev(o.dev());
    l->set_ino(o.ino());
    l->set_build_id(text::Hex(o.build_id()));
    for (const auto& n : o.needed()) l->add_needed(n);
    l->set_rpath(o.rpath());
    l->set_runpath(o.runpath());
    obj.load_entry = EntryCount() - 1;
    obj.load_seq = en->seq();
    obj.has_open_seq = true;
    obj.open_seq = e.seq();
    Obj& slot = Mut(o.id());
    // The searches of an object that ended are not this one's (whether the builder still
    // holds that object or forgot it: Live).
    if (slot.ended) searched_.erase(searched_.lower_bound({o.id(), 0}), searched_.lower_bound({o.id() + 1, 0}));
    // An id opened again keeps its last close (the closes are flushed by now).
    obj.has_close_seq = slot.has_close_seq;
    obj.close_seq = slot.close_seq;
    if (open_.count(o.id()) != 0) Closed(o.id(), slot);
    slot = obj;
    Opened(o.id(), slot);
    RefById(o.id(), l->mutable_object());
    py_->Attribute(en, batch_open_ ? batch_request_.first : "", names_[obj.path], requester_path);
    batch_objects_.push_back(o.id());
  }

  void OnClose(const v1::Event& e) {
    FlushSearch();
    closes_.ids.push_back(e.objclose().id());
    closes_.events.push_back({e.seq(), e.mono_ns(), e.tid()});
    closes_.unrelocated |= e.objclose().unrelocated();
  }

  void OnActivity(const v1::Event& e) {
    const auto kind = e.activity().kind();
    if (kind == v1::ACTIVITY_ADD) {
      // ADD comes between a search and the objopen it leads to: keep the search.
      FlushCloses(false);
      if (batch_open_) EndBatch();
      if (batch_objects_.empty()) HandOver();
      // A failed dlopen rolls back what its batch mapped, from here on.
      batch_first_entry_ = EntryCount();
      // The executable and ld.so are opened before the first ADD: same batch.
      if (seen_add_) ++batch_;
      seen_add_ = true;
      batch_open_ = true;
      batch_request_ = pending_.active ? std::make_pair(pending_.name, pending_.requester)
                                       : last_request_;
      return;
    }
    FlushSearch();
    if (kind == v1::ACTIVITY_CONSISTENT) {
      if (batch_open_) EndBatch();
      if (!closes_.ids.empty()) closes_sealed_ = true;
    }
  }

  // A search that no objopen followed.
  void FlushSearch() {
    if (!pending_.active) return;
    pending_.active = false;
    last_request_ = {pending_.name, pending_.requester};
    v1::Entry* en = NewEntry(pending_.seq, pending_.mono_ns, pending_.tid);
    en->set_truncated(pending_.truncated);
    v1::SearchResult* s = en->mutable_search();
    s->set_requested_name(pending_.name);
    Ref(pending_.requester, s->mutable_requester());
    for (const auto& c : pending_.tried) *s->add_tried() = c;
    py_->Attribute(en, pending_.name);
    if (pending_.interrupted) {
      s->set_outcome("unknown: events after this search were lost, so whether it mapped an "
                     "object is not known");
      return;
    }
    for (const auto& c : pending_.tried) {
      bool same = false;
      ForEachOpen([&](uint64_t id) {
        if (names_[Find(id)->path] != c.path()) return false;
        s->set_outcome("same file as an object already loaded");
        Ref(id, s->mutable_same_as());
        return same = true;
      });
      if (same) return;
    }
    s->set_outcome(pending_.tried.empty() && pending_.name.find('/') == std::string::npos
                       ? "no candidate tried (RTLD_NOLOAD probe, or every directory skipped)"
                       : "no new object mapped: not found, or the same file as an object "
                         "already loaded under another name");
  }

  // The NEEDED entries of this batch's objects that no search was made for were
  // matched against objects already in the namespace (dl-load.c _dl_map_object).
  void EndBatch() {
    batch_open_ = false;
    const std::vector<uint64_t> batch_objects = std::move(batch_objects_);
    batch_objects_.clear();
    for (uint64_t id : batch_objects) {
      auto it = objects_.find(id);
      if (it == objects_.end() || it->second.load_entry < 0) continue;
      const Obj o = it->second;
      v1::Load* l = LoadOf(o);
      for (uint32_t name : names_.List(o.needed)) {
        if (searched_.count({id, name}) != 0) continue;
        ForEachOpen(
            [&](uint64_t oid) {
              const Obj& other = *Find(oid);
              if (oid == id || other.lmid != o.lmid) return false;
              std::string how;
              if (other.alias == name)
                how = "requested name";
              else if (other.soname == name)
                how = "SONAME";
              else if (other.path == name)
                how = "file name";
              if (how.empty()) return false;
              v1::Reuse* r = l->add_reused();
              r->set_name(names_[name]);
              RefById(oid, r->mutable_object());
              r->set_matched_by(how);
              r->set_loaded_earlier(other.batch < o.batch);
              return true;
            },
            name);
      }
    }
  }

  // An object is open: in open_, and in open_by_name_ under its requested name, SONAME
  // and path.
  void Opened(uint64_t id, const Obj& o) {
    open_.insert(id);
    for (uint32_t n : {o.alias, o.soname, o.path})
      if (n != Names::kNone) open_by_name_[n].insert(id);
  }
  void Closed(uint64_t id, const Obj& o) {
    open_.erase(id);
    for (uint32_t n : {o.alias, o.soname, o.path}) {
      auto it = open_by_name_.find(n);
      if (it == open_by_name_.end()) continue;
      it->second.erase(id);
      if (it->second.empty()) open_by_name_.erase(it);
    }
  }

  void FlushCloses(bool at_exit) {
    if (closes_.ids.empty()) return;
    const EventWhen first = closes_.events.front();
    if (closes_.unrelocated) {
      v1::Entry* en = NewEntry(first.seq, first.mono_ns, first.tid);
      v1::FailedDlopen* f = en->mutable_failed_dlopen();
      // The dlopen that failed is the request that started the batch.
      f->set_requested_name(batch_request_.first);
      Ref(batch_request_.second, f->mutable_requester());
      for (uint64_t id : closes_.ids) {
        Ref(id, f->add_rolled_back());
        auto it = objects_.find(id);
        // What the failed dlopen's batch mapped (an object of an earlier batch was
        // relocated, so it is not this rollback's).
        if (it != objects_.end() && it->second.load_entry >= batch_first_entry_) {
          LoadOf(it->second)->set_rolled_back(true);
          it->second.rolled_back = true;
        }
      }
      if (f->requested_name().empty() && !closes_.ids.empty()) {
        const Obj* last = Live(closes_.ids.back());
        if (last != nullptr && last->alias != Names::kNone) f->set_requested_name(names_[last->alias]);
      }
      py_->Attribute(en, batch_request_.first);
    } else {
      for (size_t i = 0; i < closes_.ids.size(); ++i) {
        const EventWhen& e = closes_.events[i];
        v1::Entry* en = NewEntry(e.seq, e.mono_ns, e.tid);
        RefById(closes_.ids[i], en->mutable_unload()->mutable_object());
        en->mutable_unload()->set_at_exit(at_exit);
      }
    }
    for (size_t i = 0; i < closes_.ids.size(); ++i) {
      // An id first seen here (its open was lost), or whose object had ended, gets a row
      // of its own.
      Obj& o = Mut(closes_.ids[i]);
      if (open_.count(closes_.ids[i]) != 0) Closed(closes_.ids[i], o);
      if (o.ended) o = Obj{};
      o.is_open = false;
      o.ended = true;
      o.end_seq = closes_.unrelocated ? first.seq : closes_.events[i].seq;
      o.has_close_seq = true;
      o.close_seq = closes_.events[i].seq;
      o.row_given = false;
      if (with_rows_ || forget_ended_) ended_.push_back(closes_.ids[i]);
    }
    closes_ = CloseGroup{};
  }

  v1::ProcessTimeline* out_;
  uint64_t start_ns_;
  PyAttribution* py_;
  Names& names_;
  const std::function<bool(const v1::ProcessTimeline&)>* final_entries_;
  google::protobuf::Arena* const parts_arena_;
  const bool with_rows_;
  const bool forget_ended_;
  std::vector<uint64_t> ended_;  // with rows: objects that ended since the last hand-over
  bool stopped_ = false;  // final_entries_ said to stop
  int64_t dropped_entries_ = 0;    // entries handed over and dropped
  int64_t batch_first_entry_ = 0;  // the first entry of the latest batch
  SearchDirs dirs_;
  uint64_t next_seq_ = 0;      // the sequence number expected next
  uint64_t dropped_seen_ = 0;  // the highest drop count received so far
  bool lossy_ = false;
  // In id order; the open ones by id too: FlushSearch and EndBatch walk the open objects
  // only (a churn of dlopens keeps millions of closed ones).
  // For a fork child, the inherited objects it did not change are base_'s: objects_ holds
  // its own objects and its copies of those it changed (Mut), open_ and open_by_name_
  // those of them that are open.
  flat_map<uint64_t, Obj> objects_;
  std::shared_ptr<const Inherited> base_;
  boost::container::flat_set<uint64_t> open_;
  // The open objects by each of their names (Names ids): EndBatch matches a NEEDED name
  // with them, not with every open object (a chain of thousands of dlopens stays linear).
  std::unordered_map<uint32_t, boost::container::flat_set<uint64_t>> open_by_name_;
  PendingSearch pending_;
  std::set<std::pair<uint64_t, uint32_t>> searched_;  // (requester, Names id)
  std::vector<uint64_t> batch_objects_;
  uint64_t batch_ = 1;
  bool seen_add_ = false;
  bool closes_sealed_ = false;
  bool batch_open_ = false;
  bool startup_done_ = false;
  std::pair<std::string, uint64_t> last_request_, batch_request_;
  CloseGroup closes_;
};

}  // namespace

v1::CandidateStep StepOf(uint32_t flag, bool requester_has_runpath) {
  if (flag & LA_SER_ORIG) return v1::STEP_AS_GIVEN;
  if (flag & LA_SER_LIBPATH) return v1::STEP_LD_LIBRARY_PATH;
  if (flag & LA_SER_RUNPATH) return requester_has_runpath ? v1::STEP_RUNPATH : v1::STEP_RPATH;
  if (flag & LA_SER_CONFIG) return v1::STEP_LD_SO_CACHE;
  if (flag & LA_SER_DEFAULT) return v1::STEP_DEFAULT_DIRS;
  return v1::STEP_UNKNOWN;
}

google::protobuf::ArenaOptions TimelineArenaOptions() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = 64u << 10;
  o.max_block_size = 4u << 20;
  return o;
}

v1::Timeline* ArenaTimeline(google::protobuf::Arena* arena) {
  return google::protobuf::Arena::CreateMessage<v1::Timeline>(arena);
}

v1::Timeline BuildTimeline(const store::TraceSet& traces) {
  v1::Timeline tl;
  BuildTimeline(traces, &tl);
  return tl;
}

void BuildTimeline(const store::TraceSet& traces, v1::Timeline* out) { BuildTimeline(traces, out, nullptr); }

namespace {

// The images fork children inherit from: (pid, image start).
std::set<std::pair<uint32_t, uint64_t>> ForkParents(const std::vector<Image>& images) {
  std::set<std::pair<uint32_t, uint64_t>> parents;
  for (const Image& img : images)
    if (const v1::ProcessStart* start = img.start(); start != nullptr && start->reason() == v1::START_FORK)
      parents.insert({static_cast<uint32_t>(start->parent_pid()), start->parent_image_start_ns()});
  return parents;
}

// Feeds the image's events to its builder; false when the builder stopped. Then the
// process's event counts: the events are in seq order, so the distinct seqs are counted
// as they change.
bool FeedEvents(const Image& img, ProcessBuilder* b, v1::ProcessTimeline* p) {
  uint64_t max_seq = 0, dropped = 0, distinct = 0;
  bool any = false;
  img.events->ForEach([&](const v1::Event& e) {
    if (!any || e.seq() != max_seq) ++distinct;
    any = true;
    max_seq = std::max(max_seq, e.seq());
    dropped = std::max(dropped, e.dropped());
    b->Add(e);
    return !b->stopped();
  });
  if (b->stopped()) return false;
  b->Finish(p->still_running());
  p->set_events(img.events->size());
  p->set_dropped(dropped);
  p->set_missing_seqs(max_seq + 1 - distinct);
  return true;
}

// A mapped file cut short after it was indexed: what was decoded of it past the cut is
// zeros.
void AddCutProblems(const store::TraceSet& traces, v1::Timeline* tl) {
  for (const auto& f : traces.files) {
    if (const auto cut = store::CutWhileDecoding(f)) {
      auto* pr = tl->add_problems();
      pr->set_file(cut->file);
      pr->set_offset(cut->offset);
      pr->set_message(cut->message);
    }
  }
}

}  // namespace

void BuildTimeline(const store::TraceSet& traces, v1::Timeline* out, const ProcessParts& parts,
                   bool with_objects) {
  v1::Timeline& tl = *out;
  Streams streams = streams::ReadStreams(traces, &tl);
  std::vector<std::pair<uint32_t, const PyStream*>> py_streams;  // (pid, events)
  std::deque<PyEvents> py_events;
  std::deque<PyStream> py_pointers;
  const std::vector<Image> images = streams::Images(streams.by_stream, &py_streams, &py_events, &py_pointers);
  const std::vector<std::vector<const PyStream*>> py_of = streams::PyStreamsOf(images, py_streams);
  std::map<std::pair<uint32_t, uint64_t>, size_t> image_index;  // (pid, start) -> index
  // The images fork children inherit from: (pid, image start).
  const std::set<std::pair<uint32_t, uint64_t>> parents = ForkParents(images);
  Names names;
  // Kept for fork children (which read only their parent's object table).
  std::vector<std::unique_ptr<ProcessBuilder>> builders;
  // What the children forked at one point of one image inherit: (image index, seq).
  std::map<std::pair<size_t, uint64_t>, std::shared_ptr<const Inherited>> inherited;
  // Where the images handed to parts make their entries and rows (reset at each
  // hand-over; it outlives each image's timeline).
  std::optional<store::ReusedArena> parts_arena;
  if (parts) parts_arena.emplace(256u << 10);
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& img = images[i];
    // Handed to parts: its own, freed once the image is complete; its entries and rows
    // are on parts_arena, dropped as they are handed over.
    std::unique_ptr<v1::ProcessTimeline, PartsOnArena> own;
    v1::ProcessTimeline* p = nullptr;
    if (parts) {
      own.reset(new v1::ProcessTimeline());
      p = own.get();
    } else {
      p = tl.add_processes();
    }
    streams::StartProcess(img, streams, p);
    const v1::ProcessStart* start = img.start();
    if (start != nullptr) image_index[{img.pid, start->image_start_ns()}] = i;
    // Import spans first: each entry is attributed as it is made.
    PyAttribution py(p, py_of[i]);
    const std::function<bool(const v1::ProcessTimeline&)> final_entries =
        [&](const v1::ProcessTimeline& part) { return parts(part, false); };
    auto b = std::make_unique<ProcessBuilder>(p, p->start_mono_ns(), &py, &names,
                                              parts ? &final_entries : nullptr, with_objects,
                                              start == nullptr ||
                                                  parents.count({img.pid, start->image_start_ns()}) != 0,
                                              parts_arena ? parts_arena->get() : nullptr);
    if (start != nullptr && start->reason() == v1::START_FORK) {
      auto it = image_index.find({static_cast<uint32_t>(start->parent_pid()),
                                  start->parent_image_start_ns()});
      if (it != image_index.end() && it->second < builders.size()) {
        p->set_parent_stream(images[it->second].stream);
        std::shared_ptr<const Inherited>& in = inherited[{it->second, start->parent_seq_at_fork()}];
        if (in == nullptr) {
          std::shared_ptr<Inherited> made = builders[it->second]->Inheritance(start->parent_seq_at_fork());
          // Listed once in the timeline, when it has an object table (not `show`'s text).
          if (!parts || with_objects) {
            v1::InheritedObjects* t = tl.add_inherited();
            t->set_parent_stream(p->parent_stream());
            t->set_parent_seq_at_fork(start->parent_seq_at_fork());
            for (const auto& [id, o] : made->objects) ProcessBuilder::Row(id, o, names, t->add_objects());
            made->table = static_cast<uint32_t>(tl.inherited_size());
          }
          in = std::move(made);
        }
        b->Inherit(in);
      }
    }
    if (!FeedEvents(img, b.get(), p)) return;
    builders.push_back(std::move(b));
    if (parts && !parts(*p, true)) return;
  }
  AddCutProblems(traces, &tl);
}

}  // namespace ldscope::model
