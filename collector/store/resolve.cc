// See resolve.h.
#include "store/resolve.h"

#include <algorithm>

namespace ldscope::store {
namespace {

// What resolving a stream's interned strings may add, per byte of the stream's records
// read so far (docs/ARCHITECTURE.md, "Bounds on reading a trace"): a name or directory
// sent once may be referred to by every later record, so without a bound a megabyte of
// trace resolves into gigabytes. A real stream adds a few bytes per byte (a directory
// and a name for a candidate record of a dozen bytes), and its first record (argv, the
// environment) leaves room for more.
constexpr uint64_t kResolvedPerByte = 16;

// Sets *out to text, cut to what the budget leaves (the event is then marked truncated,
// as the audit library marks a string it cut).
void Resolve(const std::string& text, uint64_t* budget, std::string* out, v1::Event* e) {
  if (text.size() <= *budget) {
    *out = text;
    *budget -= text.size();
    return;
  }
  out->assign(text, 0, static_cast<size_t>(*budget));
  *budget = 0;
  e->set_truncated(true);
}

}  // namespace

// Undoes the audit library's wire economies, per process image in sequence order:
// timestamps sent as offsets from the image's start, search names sent once per
// search, candidate directories interned per connection (see events.proto). One
// stream's state; Apply its events in seq order, each with its record's size.
void Apply(Resolution& r, size_t record_size, v1::Event* e) {
  r.budget += kResolvedPerByte * record_size;
  if (e->has_process_start()) {
    r.image_start = e->process_start().image_start_ns();
    r.dirs.clear();  // a new connection (or file) starts a new table
  }
  if (e->mono_ns() == 0) e->set_mono_ns(r.image_start + e->offset_ns());
  if (!e->has_search()) return;
  v1::Search* s = e->mutable_search();
  if (!s->name().empty()) {
    r.name = s->name();
  } else {
    Resolve(r.name, &r.budget, s->mutable_name(), e);
  }
  if (s->dir_ref() == 0) return;
  if (!s->dir().empty()) r.dirs[s->dir_ref()] = s->dir();
  auto it = r.dirs.find(s->dir_ref());
  static const std::string kUnknown = "(unknown directory)";
  const std::string& dir = it != r.dirs.end() ? it->second : kUnknown;
  const std::string& base = s->base().empty() ? r.name : s->base();
  if (dir.size() + 1 + base.size() <= r.budget) {
    s->mutable_candidate()->reserve(dir.size() + 1 + base.size());
    *s->mutable_candidate() = dir;
    s->mutable_candidate()->push_back('/');
    s->mutable_candidate()->append(base);
    r.budget -= dir.size() + 1 + base.size();
  } else {
    Resolve(dir + "/" + base.substr(0, std::min<size_t>(base.size(), r.budget)), &r.budget, s->mutable_candidate(), e);
  }
  s->clear_dir_ref();
  s->clear_dir();
  s->clear_base();
}

}  // namespace ldscope::store
