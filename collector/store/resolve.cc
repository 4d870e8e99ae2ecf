// See resolve.h.
#include "store/resolve.h"

#include <algorithm>

#include "text/escape.h"

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

namespace {

void Esc(std::string* s) {
  if (!text::PlainAscii(*s)) *s = text::Escape(*s);  // else it is its own escape
}
// Escapes msg's string field, through its mutable accessor only when it is not plain
// ASCII: the mutable accessor of an unset field makes a string on the event's arena,
// and a destructor to run at the arena's reset, for nothing (every empty SONAME, RPATH
// and RUNPATH of every event).
#define LDSCOPE_ESC(msg, field)                                           \
  do {                                                                    \
    if (!text::PlainAscii((msg)->field())) Esc((msg)->mutable_##field()); \
  } while (0)
void Esc(google::protobuf::RepeatedPtrField<std::string>* list) {
  for (auto& s : *list) Esc(&s);
}
void Esc(v1::PyFrame* f) {
  LDSCOPE_ESC(f, file);
  LDSCOPE_ESC(f, function);
}

}  // namespace

// The read boundary of the byte strings: from here on (timeline, analysis, report,
// every renderer) they are escaped text. After Resolve, which joins raw bytes.
void EscapeStrings(v1::Event* e) {
  switch (e->body_case()) {
    case v1::Event::kProcessStart: {
      auto* p = e->mutable_process_start();
      LDSCOPE_ESC(p, exe);
      Esc(p->mutable_argv());
      LDSCOPE_ESC(p, cwd);
      for (auto& v : *p->mutable_env()) {
        LDSCOPE_ESC(&v, name);
        LDSCOPE_ESC(&v, value);
      }
      break;
    }
    case v1::Event::kSearch:
      LDSCOPE_ESC(e->mutable_search(), name);
      LDSCOPE_ESC(e->mutable_search(), candidate);
      LDSCOPE_ESC(e->mutable_search(), dir);
      LDSCOPE_ESC(e->mutable_search(), base);
      break;
    case v1::Event::kObjopen: {
      auto* o = e->mutable_objopen();
      LDSCOPE_ESC(o, path);
      LDSCOPE_ESC(o, soname);
      Esc(o->mutable_needed());
      LDSCOPE_ESC(o, rpath);
      LDSCOPE_ESC(o, runpath);
      break;
    }
    case v1::Event::kPyStart:
      LDSCOPE_ESC(e->mutable_py_start(), executable);
      Esc(e->mutable_py_start()->mutable_hook_modules());
      break;
    case v1::Event::kPyImport:
      LDSCOPE_ESC(e->mutable_py_import(), module);
      for (auto& f : *e->mutable_py_import()->mutable_stack()) Esc(&f);
      break;
    case v1::Event::kPyImportEnd:
      LDSCOPE_ESC(e->mutable_py_import_end(), module);
      LDSCOPE_ESC(e->mutable_py_import_end(), error);
      break;
    case v1::Event::kPyDlopen:
      LDSCOPE_ESC(e->mutable_py_dlopen(), name);
      for (auto& f : *e->mutable_py_dlopen()->mutable_stack()) Esc(&f);
      break;
    case v1::Event::kCollector:
      for (auto& u : *e->mutable_collector()->mutable_untraced_after()) LDSCOPE_ESC(&u, exe_after);
      break;
    case v1::Event::kMountFacts:
      LDSCOPE_ESC(e->mutable_mount_facts(), mount_point);
      LDSCOPE_ESC(e->mutable_mount_facts(), source);
      Esc(e->mutable_mount_facts()->mutable_dirs());
      break;
    default:
      break;
  }
}

#undef LDSCOPE_ESC

}  // namespace ldscope::store
