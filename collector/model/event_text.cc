// See event_text.h.
#include "model/event_text.h"

#include <string>

#include "text/escape.h"

namespace ldscope::model {
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

// Field by field, for speed (a trace's every event comes through here); timeline_test
// checks it against the schema.
void EscapeByteStrings(v1::Event* e) {
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
      LDSCOPE_ESC(o, cwd);
      LDSCOPE_ESC(o, requested);
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
    case v1::Event::kOwnerFacts: {
      auto* o = e->mutable_owner_facts();
      Esc(o->mutable_paths());
      LDSCOPE_ESC(o, name);
      LDSCOPE_ESC(o, version);
      LDSCOPE_ESC(o, record);
      LDSCOPE_ESC(o, unknown);
      LDSCOPE_ESC(o, arch);
      Esc(o->mutable_tags());
      Esc(o->mutable_requires_dist());
      LDSCOPE_ESC(o, root);
      break;
    }
    default:
      break;
  }
}

#undef LDSCOPE_ESC

}  // namespace ldscope::model
