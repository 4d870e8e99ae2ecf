// What every analysis pass reads: the timeline, a per-process index of its objects
// (who loaded what, when, how, and what was reused), the object files on disk (read
// once, cached) and the loader model. Passes are pure functions of this context.
#pragma once

#include <algorithm>
#include <deque>
#include <iterator>
#include <ostream>
#include <stdexcept>
#include <map>
#include <memory>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/container/deque.hpp>
#include <boost/container/flat_map.hpp>
#include <fmt/format.h>

#include "elf/elf_file.h"
#include "elf/facts.h"
#include "text/strings.h"
#include "ldscope_proto/report.pb.h"
#include "ldscope_proto/timeline.pb.h"
#include "loader/search.h"

namespace ldscope::analysis {

// A lookup scope: objects in the order ld.so searches them. Whether one of them defines
// a symbol is asked of each object's own hash table (elf::ElfInfo::Find, glibc's
// matching rule), as do_lookup does, instead of indexing every definition up front. The
// object that answered last is asked first next time (the references of one object
// mostly go to the same few libraries): that changes the cost, never the answer. The
// ElfInfo objects must outlive the scope (Files keeps them for the whole report).
class SymbolScope {
 public:
  SymbolScope() = default;
  explicit SymbolScope(std::vector<const elf::ElfInfo*> objects);
  bool Defines(const elf::SymbolQuery& q) const;
  bool Defines(std::string_view name, std::string_view version) const {
    return Defines(elf::SymbolQuery(name, version));
  }
  const std::vector<const elf::ElfInfo*>& objects() const { return objects_; }

 private:
  std::vector<const elf::ElfInfo*> objects_;
  mutable std::vector<uint32_t> order_;  // indexes into objects_, the last to answer first
};

// Any of several objects defines the symbol.
bool AnyDefines(const std::vector<const elf::ElfInfo*>& scope, std::string_view name,
                std::string_view version);

// Reads and caches ELF files by path (mapped: their symbols are looked up in place);
// remembers which could not be read. With a trace's facts (elf/facts.h), a file that is missing, or that is no
// longer the one traced (another build-id; without one, another size or modification
// time), is answered from the trace instead.
//
// Traces of many hosts (`report host-a/ host-b/ ...`): each host gets a view,
// Files(&shared), with its own trace's facts, its own errors and changed files; the files
// read from disk and the ElfInfos made of facts (by path and record content) live in
// `shared`, so a library is read once for all hosts, and a host's
// answer for a path depends only on the file here and that host's record of it.
class Files {
 public:
  Files() = default;
  explicit Files(Files* shared) : shared_(shared) {}
  Files(const Files&) = delete;
  Files& operator=(const Files&) = delete;
  void set_trace_facts(const elf::TraceFacts* facts) { facts_ = facts; }
  const elf::TraceFacts* trace_facts() const { return facts_; }
  const elf::ElfInfo* Get(const std::string& path);
  // A file read already, as Get would have read it from disk (`run`: its collector read
  // each loaded file while the programs ran, analysis/record_facts.h): Get answers with
  // it, the file as it was then, instead of reading the path again.
  void Adopt(std::unique_ptr<elf::ElfInfo> info);
  // Reads from disk, on a few threads, the paths Get has not read yet, with their
  // undefined symbols indexed: what the passes would read one by one. Changes no answer.
  void ReadAhead(const std::vector<std::string>& paths);
  // elf::FindString and elf::FindStrings of the file, or what the trace recorded of them
  // ("" and none when the writer did not look for that needle).
  std::string FindString(const std::string& path, std::string_view needle);
  std::vector<std::string> FindStrings(const std::string& path, std::string_view needle);
  const std::map<std::string, std::string>& errors() const { return errors_; }
  // Paths answered from the trace because the file had changed: path -> how.
  const std::map<std::string, std::string>& changed() const { return changed_; }

 private:
  // The store (this Files, or the shared one): disk reads by path, facts-made ElfInfos
  // by path and record, strings found in disk files.
  Files& Store() { return shared_ != nullptr ? *shared_ : *this; }
  struct DiskRead {
    std::unique_ptr<elf::ElfInfo> info;
    std::string error;
  };
  const DiskRead& ReadDisk(const std::string& path);
  Result<const elf::ElfInfo*> MadeFromFacts(const std::string& path, const elf::FactsRecord& rec);

  Files* shared_ = nullptr;
  const elf::TraceFacts* facts_ = nullptr;
  // This view's answers.
  std::unordered_map<std::string, const elf::ElfInfo*> answers_;
  std::map<std::string, std::string> errors_, changed_;
  // The store's.
  std::unordered_map<std::string, DiskRead> disk_;
  std::unordered_map<std::string, std::pair<std::unique_ptr<elf::ElfInfo>, std::string>> from_facts_;
  std::unordered_map<std::string, std::string> disk_string_;                 // path \0 needle
  std::unordered_map<std::string, std::vector<std::string>> disk_strings_;  // path \0 needle
};

// A string of the context's pool (text::StringPool): the paths, SONAMEs and build-ids of a
// churn's millions of objects are a few strings, each held once. Reads as the
// const std::string it names; its members through ->.
class Str {
 public:
  Str() : s_(&Empty()) {}
  explicit Str(const std::string* s) : s_(s) {}
  operator const std::string&() const { return *s_; }  // NOLINT: reads as the string
  const std::string& str() const { return *s_; }
  operator std::string_view() const { return *s_; }     // NOLINT
  const std::string* operator->() const { return s_; }
  bool empty() const { return s_->empty(); }
  size_t size() const { return s_->size(); }
  char front() const { return s_->front(); }
  char back() const { return s_->back(); }
  friend bool operator==(const Str& a, const Str& b) { return *a.s_ == *b.s_; }
  friend bool operator==(const Str& a, const std::string& b) { return *a.s_ == b; }
  friend bool operator==(const Str& a, std::string_view b) { return *a.s_ == b; }
  friend bool operator==(const Str& a, const char* b) { return *a.s_ == b; }
  friend bool operator<(const Str& a, const Str& b) { return *a.s_ < *b.s_; }
  friend std::string operator+(const Str& a, std::string_view b) { return *a.s_ + std::string(b); }
  friend std::string operator+(std::string_view a, const Str& b) { return std::string(a) + *b.s_; }
  friend std::ostream& operator<<(std::ostream& os, const Str& s) { return os << *s.s_; }

 private:
  static const std::string& Empty();
  const std::string* s_;
};

// One loaded object of one process image, with how it got there.
struct Obj {
  uint64_t id = 0;
  // Its load entry's facts, shared by the loads that are alike (LoadFacts); nullptr for
  // objects inherited over fork or known only from a close.
  const v1::Load* load = nullptr;
  Str path, soname, build_id;
  int64_t lmid = 0;
  uint64_t dev = 0, ino = 0;
  uint64_t open_seq = 0;
  uint64_t close_seq = UINT64_MAX;  // UINT64_MAX: never unloaded
  double at_ms = 0;
  uint64_t requester = 0;
  bool rolled_back = false;
  // Where its own requests begin among the process's lookups by request (set by
  // ProcessIndex::Index; UINT32_MAX: none, or too far to say in 32 bits).
  uint32_t requests = UINT32_MAX;
  // Its position in ProcessIndex::objects (passes keep per-object state in arrays).
  uint32_t index = 0;
};

// What the passes read of a load (Obj::load): the entry's Load without what tells one
// object's load from another's alike (the object's and the requester's references and
// ids, the base address, the rolled-back mark: Obj has those), and with each reuse's
// object reduced to its id (the object table has the rest). A churn of a million
// dlopens of one library has a few of them.
v1::Load LoadFacts(const v1::Load& l);

// A process image's objects by id, as one map in id order (the model's object table,
// timeline.proto): the image's own rows and, for a fork child, the rows of its inherited
// table that it has no row of its own for. The inherited rows are read-only and shared
// by every child forked at that point of the parent (2,000 children of a 2,000-object
// image hold one table), their Obj::index counting from 0, the own rows' from after them.
class ObjectTable {
 public:
  using value_type = std::pair<uint64_t, Obj>;
  // Sorted blocks are what every pass walks (most walk all objects); a deque: a churn's
  // millions of objects are never copied whole into a bigger array as it grows.
  using Rows = boost::container::flat_map<uint64_t, Obj, std::less<>, boost::container::deque<value_type>>;
  // An inherited table as the context reads it (shared), with its objects by SONAME.
  struct Inherited {
    Rows rows;
    std::unordered_map<std::string, std::vector<const Obj*>> by_soname;
  };

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = ObjectTable::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;
    const_iterator() = default;
    const_iterator(const ObjectTable* t, Rows::const_iterator own, Rows::const_iterator inherited)
        : t_(t), own_(own), inh_(inherited) {}
    reference operator*() const { return Own() ? *own_ : *inh_; }
    pointer operator->() const { return &**this; }
    const_iterator& operator++() {
      if (Own()) {
        // An own row of an inherited id stands for both.
        if (inh_ != t_->InheritedRows().end() && inh_->first == own_->first) ++inh_;
        ++own_;
      } else {
        ++inh_;
      }
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++*this;
      return was;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.own_ == b.own_ && a.inh_ == b.inh_;
    }
    friend bool operator!=(const const_iterator& a, const const_iterator& b) { return !(a == b); }

   private:
    bool Own() const {
      return inh_ == t_->InheritedRows().end() || (own_ != t_->own_.end() && own_->first <= inh_->first);
    }
    const ObjectTable* t_ = nullptr;
    Rows::const_iterator own_, inh_;
  };

  const_iterator begin() const { return {this, own_.begin(), InheritedRows().begin()}; }
  const_iterator end() const { return {this, own_.end(), InheritedRows().end()}; }
  const_iterator find(uint64_t id) const {
    if (auto it = own_.find(id); it != own_.end()) return {this, it, InheritedRows().lower_bound(id)};
    if (auto it = InheritedRows().find(id); it != InheritedRows().end()) return {this, own_.lower_bound(id), it};
    return end();
  }
  const Obj& at(uint64_t id) const {
    const const_iterator it = find(id);
    if (it == end()) throw std::out_of_range("ObjectTable::at");
    return it->second;
  }
  bool empty() const { return own_.empty() && InheritedRows().empty(); }
  // The rows (an own row of an inherited id counts once).
  size_t size() const {
    size_t n = InheritedRows().size() + own_.size();
    if (!InheritedRows().empty())
      for (const auto& [id, o] : own_) n -= InheritedRows().count(id);
    return n;
  }
  // Every Obj::index is below this.
  size_t slots() const { return InheritedRows().size() + own_.size(); }

  // The image's own rows (Obj::index from InheritedRows().size()), and its inherited
  // table (nullptr: none).
  Rows& own() { return own_; }
  const Rows& own() const { return own_; }
  const Inherited* inherited() const { return inherited_.get(); }
  void set_inherited(std::shared_ptr<const Inherited> in) { inherited_ = std::move(in); }
  const Rows& InheritedRows() const {
    static const Rows none;
    return inherited_ != nullptr ? inherited_->rows : none;
  }

 private:
  Rows own_;
  std::shared_ptr<const Inherited> inherited_;
};

struct ProcessIndex {
  const v1::ProcessTimeline* p = nullptr;
  // By id: every row of the model's object table (with a fork child's inherited rows).
  using Objects = ObjectTable;
  Objects objects;
  // Its entries that are not loads or unloads (those are in objects): the searches that
  // mapped nothing and the failed dlopens, in order; and how many of them came before
  // the first dlopen's load entry.
  std::vector<const v1::Entry*> entries;
  size_t before_first_dlopen = SIZE_MAX;
  loader::Environment env;
  const Obj* exe = nullptr;
  // The object requester got for name (a load entry's requested name), the first in id
  // order; nullptr: none.
  const Obj* Requested(const Obj& requester, const std::string& name) const;
  // The own objects of a SONAME, in id order (the inherited ones: objects.inherited()).
  std::unordered_map<std::string, std::vector<const Obj*>> by_soname;
  // Builds the lookups over objects (in id order), once all objects are known, so that
  // a trace of a million dlopens is not searched object by object per object.
  void Index();
  // Objects alive together with o in its namespace at seq.
  std::vector<const Obj*> AliveAt(int64_t lmid, uint64_t seq) const;
  // The first object (in id order) of that SONAME alive in lmid at seq.
  const Obj* AliveWithSoname(const std::string& soname, int64_t lmid, uint64_t seq) const;
  // The chain of loaders of o (nearest first, ending with the executable), for the
  // RPATH step of the loader model.
  std::vector<loader::Object> LoaderChain(const Obj& o, Files& files) const;
  loader::Object AsRequester(const Obj& o, Files& files) const;
  const Obj* Executable() const;

 private:
  struct Request {
    uint64_t requester;
    const std::string* name;
    const Obj* obj;
  };
  std::vector<Request> by_request_;  // by (requester, name), then id
};

// Objects in load order.
inline bool LoadedBefore(const Obj* a, const Obj* b) { return a->open_seq < b->open_seq; }
// Both alive at some point of the timeline.
inline bool Overlap(const Obj& a, const Obj& b) { return a.open_seq < b.close_seq && b.open_seq < a.close_seq; }
// Those of files alive together with another of them, in files' order.
std::vector<const Obj*> AliveTogether(const std::vector<const Obj*>& files);
// std::sort of v by less, skipped when v is in that order already (a churn's millions of
// objects come in load and id order).
template <typename T, typename Less>
void SortUnlessSorted(std::vector<T>& v, Less less) {
  if (!std::is_sorted(v.begin(), v.end(), less)) std::sort(v.begin(), v.end(), less);
}

// The object glibc bound o's NEEDED name to (nullptr: none, the search failed).
const Obj* BoundFor(const ProcessIndex& pi, const Obj& o, const std::string& name);

class Context {
 public:
  // facts: the ELF facts the trace recorded (may be nullptr), for files gone or changed.
  // files: a cache shared with other contexts (`report` over many hosts reads each
  // library once); nullptr: a cache of its own.
  explicit Context(const v1::Timeline& t, const elf::TraceFacts* facts = nullptr,
                   Files* files = nullptr);
  // A context of a timeline received in parts (model::BuildTimeline with ProcessParts
  // and objects): AddPart each part as it comes. *t is the timeline model::BuildTimeline
  // fills (its problems and collector summary); each process is added to it without its
  // loads and unloads (what the passes read of those is in the object table), so that a
  // churn's millions of entries are never held.
  Context(v1::Timeline* t, const elf::TraceFacts* facts = nullptr, Files* files = nullptr);
  ~Context();
  bool AddPart(const v1::ProcessTimeline& part, bool complete);
  const v1::Timeline& timeline() const { return t_; }
  const std::vector<ProcessIndex>& processes() const { return procs_; }
  Files& files() { return *files_; }
  // files().Get(path) of an object's path, remembered by the string's address in the
  // context's pool (a churn asks for the same few files a million times).
  const elf::ElfInfo* File(const Str& path);
  const loader::LdCache& cache() const { return cache_; }
  // Whether /etc/ld.so.cache could be read (when not, "no entry" is unknown).
  const Status& cache_status() const { return cache_status_; }

  // "2.16.2+cuda11.8" from the object itself where it says so, else its file name.
  std::string VersionOf(const std::string& path, const std::string& soname);
  // "needed by /x/libtorch_cuda.so (RPATH)", "dlopen from /…/_ctypes…so", ...
  std::string HowLoaded(const ProcessIndex& pi, const Obj& o) const;
  // A Library message for a finding.
  v1::Library Describe(const ProcessIndex& pi, const Obj& o);
  // The same file on disk: equal paths, or one device and inode now. Each path is
  // looked at once per context (a report asks of libc.so.6 hundreds of times); a path
  // that cannot be looked at is no other path's file.
  bool SameFile(const std::string& a, const std::string& b);
  // One object per distinct file (the device and inode the trace recorded, else
  // SameFile), the first loaded first.
  std::vector<const Obj*> DistinctFiles(std::vector<const Obj*> objs);
  // The package that installed the file at path, as the trace recorded
  // it where it was taken (events.proto's OwnerFacts); nullptr: not recorded, unknown.
  // Never looked up on this machine.
  const v1::Owner* OwnerOf(const std::string& path);

 private:
  class ProcessReader;
  void Init();
  // The LoadFacts of l, one copy of each, with its build-id as a string of the pool
  // (interned once, not for every object that shares it).
  struct KeptLoad {
    v1::Load facts;
    Str build_id;
  };
  const KeptLoad* Facts(const v1::Load& l);
  void AddProcess(ProcessIndex pi);
  // Timeline.inherited's table `table` (1-based) as the processes read it, made once.
  std::shared_ptr<const ObjectTable::Inherited> InheritedTable(uint32_t table);

  const v1::Timeline& t_;
  v1::Timeline* parts_of_ = nullptr;  // received in parts: processes are added here
  std::unique_ptr<ProcessReader> reading_;
  text::StringPool strings_;
  std::unordered_map<const std::string*, const elf::ElfInfo*> file_of_;
  // By a hash of what they keep.
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<KeptLoad>>> load_facts_;
  bool multiarch_ = false;
  std::vector<ProcessIndex> procs_;
  Files own_files_;
  Files* files_;
  loader::LdCache cache_;
  Status cache_status_;
  loader::IdentCache idents_;  // the processes' env.idents
  struct Identity {
    bool known = false;  // stat worked
    uint64_t dev = 0, ino = 0;
  };
  std::unordered_map<std::string, Identity> identities_;  // SameFile's, by path
  const Identity& IdentityOf(const std::string& path);    // looked at once per path
  std::map<std::string, std::string> versions_;
  std::map<uint32_t, std::shared_ptr<const ObjectTable::Inherited>> inherited_;
  std::unordered_map<std::string, const v1::Owner*> owners_;  // by path, made at the first OwnerOf
  bool owners_indexed_ = false;
};

// The family of a library: its SONAME (or file name) up to ".so", without a wheel's
// "-<8 hex>" rename suffix: libnccl.so.2 and libnccl.so.2.16.2 are both "libnccl".
std::string Family(const std::string& soname_or_name);
using text::BaseName;  // text/strings.h
// /a/b/../c -> /a/c (lexically: symlinks are left alone, as the loader leaves them).
std::string NormalPath(const std::string& path);
// A key of several fields, each ended by a NUL (which no path, name or argument holds, as
// a newline can): fields that differ never make one key.
std::string FieldsKey(std::initializer_list<std::string_view> fields);

// When l was loaded, for a finding's text: lead + "at +T ms" (T since the process image
// started); "" in a snapshot of a running process, which sees what is loaded, not when it
// was (its objects carry no time).
std::string LoadedAt(const ProcessIndex& pi, const v1::Library& l, const char* lead);

class FindingBuilder;  // finding_builder.h
// In traced Python, when one file holds the two lines that loaded `early` and then
// `late` (two imports, or two ctypes loads): the fix of swapping them.
void AddSwapFix(const ProcessIndex& pi, const Obj& late, const Obj& early, FindingBuilder* f);

}  // namespace ldscope::analysis

template <>
struct fmt::formatter<ldscope::analysis::Str> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const ldscope::analysis::Str& s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(s.str(), ctx);
  }
};
