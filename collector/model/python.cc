// See python.h. The hook's timestamps and the audit library's come from the same
// clock (CLOCK_MONOTONIC) in the same thread, so "during" is a comparison of times:
// an import's loads lie between its begin and end events on that thread; a ctypes
// dlopen's loads follow its event, and its batch asked for the name ctypes passed.
#include "model/python.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace ldscope::model {
namespace {

struct Span {
  uint64_t start = 0, end = 0;  // mono_ns; end 0: never ended
  uint32_t tid = 0;
  int parent = -1;
  v1::PyImportSpan* out = nullptr;
  int64_t dlopen_flags = -1;  // sys.getdlopenflags() at its start (-1: not sent)
};

struct Dlopen {
  uint64_t at = 0;
  uint32_t tid = 0;
  const v1::PyDlopen* ev = nullptr;
};

// The name is escaped text already (its backslashes doubled): only quotes need one.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("\\'") : std::string(1, c);
  return out + "'";
}

v1::SourceLine Line(const v1::PyFrame& f) {
  v1::SourceLine l;
  l.set_file(f.file());
  l.set_line(f.line());
  l.set_function(f.function());
  return l;
}

}  // namespace

void AttachPython(v1::ProcessTimeline* p, const std::vector<EntryRequest>& requests,
                  const std::vector<const PyStream*>& streams) {
  if (streams.empty()) return;
  std::vector<const v1::Event*> events;
  std::vector<std::string> hook_modules;
  uint64_t hook_ready_ns = UINT64_MAX;  // first PyStart: the hook's own imports came before
  auto* info = p->mutable_python();
  for (const PyStream* s : streams) {
    for (const v1::Event* e : *s) {
      events.push_back(e);
      if (!e->has_py_start()) continue;
      hook_ready_ns = std::min(hook_ready_ns, e->mono_ns());
      if (info->executable().empty()) {
        info->set_executable(e->py_start().executable());
        info->set_version(e->py_start().version());
      }
      for (const auto& m : e->py_start().hook_modules()) hook_modules.push_back(m);
    }
  }
  info->set_streams(static_cast<uint32_t>(streams.size()));
  for (const PyStream* s : streams) {
    uint64_t max_seq = 0, dropped = 0;
    for (const v1::Event* e : *s) {
      max_seq = std::max(max_seq, e->seq());
      dropped = std::max(dropped, e->dropped());
      info->set_truncated(info->truncated() + e->truncated());
    }
    info->set_events(info->events() + s->size());
    info->set_dropped(info->dropped() + dropped);
    info->set_missing_seqs(info->missing_seqs() + max_seq + 1 - s->size());
  }
  std::stable_sort(events.begin(), events.end(), [](const v1::Event* a, const v1::Event* b) {
    return a->mono_ns() < b->mono_ns();
  });
  const uint64_t t0 = p->start_mono_ns();
  auto offset = [&](uint64_t ns) { return ns >= t0 ? ns - t0 : 0; };

  // Import spans, nested per thread; ctypes dlopens.
  std::vector<Span> spans;
  std::vector<Dlopen> dlopens;
  std::map<uint32_t, std::vector<int>> open;  // tid -> stack of span indexes
  for (const v1::Event* e : events) {
    if (e->has_py_import()) {
      Span s;
      s.start = e->mono_ns();
      s.tid = e->tid();
      auto& stack = open[e->tid()];
      s.parent = stack.empty() ? -1 : stack.back();
      if (e->py_import().has_dlopen_flags()) s.dlopen_flags = e->py_import().dlopen_flags();
      s.out = p->add_imports();
      s.out->set_module(e->py_import().module());
      s.out->set_tid(e->tid());
      s.out->set_start_offset_ns(offset(e->mono_ns()));
      s.out->set_parent(s.parent < 0 ? 0 : static_cast<uint32_t>(s.parent + 1));
      if (e->py_import().stack_size() > 0) *s.out->mutable_site() = Line(e->py_import().stack(0));
      stack.push_back(static_cast<int>(spans.size()));
      spans.push_back(s);
    } else if (e->has_py_import_end()) {
      auto& stack = open[e->tid()];
      const auto& end = e->py_import_end();
      auto it = std::find_if(stack.rbegin(), stack.rend(), [&](int i) {
        return spans[i].out->module() == end.module();
      });
      if (it == stack.rend()) continue;  // began before this process (fork) or unknown
      Span& s = spans[*it];
      s.end = e->mono_ns();
      s.out->set_end_offset_ns(offset(e->mono_ns()));
      s.out->set_ended(true);
      s.out->set_failed(end.failed());
      s.out->set_error(end.error());
      stack.erase(std::next(it).base(), stack.end());
    } else if (e->has_py_dlopen()) {
      dlopens.push_back({e->mono_ns(), e->tid(), &e->py_dlopen()});
    }
  }

  // The dlopen mode of the ctypes call or import behind a load, when the hook read it
  // (it goes on the Load, not on PyCause).
  int64_t mode = -1;
  auto cause_at = [&](uint64_t at, uint32_t tid, const std::string& request) {
    mode = -1;
    v1::PyCause c;
    int inner = -1;
    for (int i = 0; i < static_cast<int>(spans.size()); ++i) {
      const Span& s = spans[i];
      if (s.tid != tid || s.start > at || (s.end != 0 && s.end < at)) continue;
      if (inner < 0 || s.start >= spans[inner].start) inner = i;
    }
    if (inner >= 0) {
      int top = inner;
      while (spans[top].parent >= 0) top = spans[top].parent;
      c.set_import_module(spans[inner].out->module());
      *c.mutable_import_site() = spans[inner].out->site();
      c.set_top_module(spans[top].out->module());
      *c.mutable_top_site() = spans[top].out->site();
      c.set_import_index(static_cast<uint32_t>(inner + 1));
      mode = spans[inner].dlopen_flags;  // for the import system's own dlopen (see below)
    }
    // The latest ctypes dlopen on this thread, if nothing began after it and the load's
    // dlopen asked for what ctypes asked for.
    const Dlopen* d = nullptr;
    for (const Dlopen& x : dlopens)
      if (x.tid == tid && x.at <= at) d = &x;
    if (d != nullptr && !request.empty() && d->ev->name() == request &&
        (inner < 0 || d->at >= spans[inner].start)) {
      c.set_dlopen_call(fmt::format("{}({})", d->ev->via().empty() ? "ctypes.CDLL" : d->ev->via(),
                                    Quote(d->ev->name())));
      if (d->ev->stack_size() > 0) *c.mutable_call_site() = Line(d->ev->stack(0));
      mode = d->ev->has_mode() ? static_cast<int64_t>(d->ev->mode()) : -1;
    }
    return c;
  };
  auto is_hook_module = [&](const std::string& path) {
    const std::string base = path.substr(path.rfind('/') + 1);
    for (const auto& m : hook_modules)
      if (base.rfind(m + ".", 0) == 0) return true;
    return false;
  };

  for (int i = 0; i < p->entries_size(); ++i) {
    v1::Entry* en = p->mutable_entries(i);
    const uint64_t at = t0 + en->offset_ns();
    if (!en->has_load() && !en->has_failed_dlopen() && !en->has_search()) continue;
    if (en->has_load() && at < hook_ready_ns && is_hook_module(en->load().object().path())) {
      en->mutable_load()->mutable_python()->set_by_hook(true);
      continue;
    }
    const std::string& request = i < static_cast<int>(requests.size()) ? requests[i].name : "";
    v1::PyCause c = cause_at(at, en->tid(), request);
    if (c.ByteSizeLong() == 0) continue;  // no cause: the field stays unset
    if (en->has_load()) {
      if (c.import_index() != 0)
        spans[c.import_index() - 1].out->set_loads(spans[c.import_index() - 1].out->loads() + 1);
      *en->mutable_load()->mutable_python() = std::move(c);
      // An import's flags are the mode of the import system's dlopen of an extension
      // module (requested by python itself or libpython), not of dlopens its C code makes.
      const std::string req = en->load().requester().path().substr(en->load().requester().path().rfind('/') + 1);
      const bool by_ctypes = !en->load().python().dlopen_call().empty();
      const bool by_import = !by_ctypes && en->load().reason() == v1::LOAD_DLOPEN &&
                             (req.rfind("python", 0) == 0 || req.rfind("libpython", 0) == 0);
      if (mode >= 0 && (by_ctypes || by_import))
        en->mutable_load()->set_dlopen_mode(static_cast<uint32_t>(mode));
    } else if (en->has_failed_dlopen()) {
      *en->mutable_failed_dlopen()->mutable_python() = std::move(c);
    } else {
      *en->mutable_search()->mutable_python() = std::move(c);
    }
  }
}

}  // namespace ldscope::model
