// See python.h. The hook's timestamps and the audit library's come from the same
// clock (CLOCK_MONOTONIC) in the same thread, so "during" is a comparison of times:
// an import's loads lie between its begin and end events on that thread; a ctypes
// dlopen's loads follow its event, and its batch asked for the name ctypes passed.
#include "model/python.h"
#include "text/strings.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace ldscope::model {
namespace {

// The name the call passed, quoted as the call's text shows it: its bytes between quotes
// (a renderer escapes them; a fix that is code quotes a name with text::PythonString).
std::string Quote(const std::string& s) { return "'" + s + "'"; }

v1::SourceLine Line(const v1::PyFrame& f) {
  v1::SourceLine l;
  l.set_file(f.file());
  l.set_line(f.line());
  l.set_function(f.function());
  return l;
}

}  // namespace

PyAttribution::PyAttribution(v1::ProcessTimeline* p, const std::vector<const PyStream*>& streams)
    : p_(p), active_(!streams.empty()) {
  if (!active_) return;
  Info(streams);
  std::vector<const v1::Event*> events;
  for (const PyStream* s : streams) events.insert(events.end(), s->begin(), s->end());
  std::stable_sort(events.begin(), events.end(), [](const v1::Event* a, const v1::Event* b) {
    return a->mono_ns() < b->mono_ns();
  });
  Spans(std::move(events));
}

// The hook's interpreter, its own modules and the streams' counts.
void PyAttribution::Info(const std::vector<const PyStream*>& streams) {
  auto* info = p_->mutable_python();
  info->set_streams(static_cast<uint32_t>(streams.size()));
  for (const PyStream* s : streams) {
    uint64_t max_seq = 0, dropped = 0;
    for (const v1::Event* e : *s) {
      max_seq = std::max(max_seq, e->seq());
      dropped = std::max(dropped, e->dropped());
      info->set_truncated(info->truncated() + e->truncated());
      if (!e->has_py_start()) continue;
      hook_ready_ns_ = std::min(hook_ready_ns_, e->mono_ns());
      if (info->executable().empty()) {
        info->set_executable(e->py_start().executable());
        info->set_version(e->py_start().version());
      }
      for (const auto& m : e->py_start().hook_modules()) hook_modules_.push_back(m);
    }
    info->set_events(info->events() + s->size());
    info->set_dropped(info->dropped() + dropped);
    info->set_missing_seqs(info->missing_seqs() + max_seq + 1 - s->size());
  }
}

// Import spans, nested per thread (ProcessTimeline.imports); ctypes dlopens.
void PyAttribution::Spans(std::vector<const v1::Event*> events) {
  const uint64_t t0 = p_->start_mono_ns();
  auto offset = [&](uint64_t ns) { return ns >= t0 ? ns - t0 : 0; };
  std::map<uint32_t, std::vector<int>> open;  // tid -> stack of span indexes
  for (const v1::Event* e : events) {
    if (e->has_py_import()) {
      Span s;
      s.start = e->mono_ns();
      s.tid = e->tid();
      auto& stack = open[e->tid()];
      s.parent = stack.empty() ? -1 : stack.back();
      if (e->py_import().has_dlopen_flags()) s.dlopen_flags = e->py_import().dlopen_flags();
      s.out = p_->add_imports();
      s.out->set_module(e->py_import().module());
      s.out->set_tid(e->tid());
      s.out->set_start_offset_ns(offset(e->mono_ns()));
      s.out->set_parent(s.parent < 0 ? 0 : static_cast<uint32_t>(s.parent + 1));
      if (e->py_import().stack_size() > 0) *s.out->mutable_site() = Line(e->py_import().stack(0));
      stack.push_back(static_cast<int>(spans_.size()));
      spans_.push_back(s);
    } else if (e->has_py_import_end()) {
      auto& stack = open[e->tid()];
      const auto& end = e->py_import_end();
      auto it = std::find_if(stack.rbegin(), stack.rend(),
                             [&](int i) { return spans_[i].out->module() == end.module(); });
      if (it == stack.rend()) continue;  // began before this process (fork) or unknown
      Span& s = spans_[*it];
      s.end = e->mono_ns();
      s.out->set_end_offset_ns(offset(e->mono_ns()));
      s.out->set_ended(true);
      s.out->set_failed(end.failed());
      s.out->set_error(end.error());
      stack.erase(std::next(it).base(), stack.end());
    } else if (e->has_py_dlopen()) {
      dlopens_.push_back({e->mono_ns(), e->tid(), &e->py_dlopen()});
    }
  }
}

v1::PyCause PyAttribution::CauseAt(uint64_t at, uint32_t tid, const std::string& request,
                                   int64_t* mode) const {
  *mode = -1;
  v1::PyCause c;
  int inner = -1;
  for (int i = 0; i < static_cast<int>(spans_.size()); ++i) {
    const Span& s = spans_[i];
    if (s.tid != tid || s.start > at || (s.end != 0 && s.end < at)) continue;
    if (inner < 0 || s.start >= spans_[inner].start) inner = i;
  }
  if (inner >= 0) {
    int top = inner;
    while (spans_[top].parent >= 0) top = spans_[top].parent;
    c.set_import_module(spans_[inner].out->module());
    *c.mutable_import_site() = spans_[inner].out->site();
    c.set_top_module(spans_[top].out->module());
    *c.mutable_top_site() = spans_[top].out->site();
    c.set_import_index(static_cast<uint32_t>(inner + 1));
    *mode = spans_[inner].dlopen_flags;  // for the import system's own dlopen (Attribute)
  }
  // The latest ctypes dlopen on this thread, if nothing began after it and the load's
  // dlopen asked for what ctypes asked for.
  const Dlopen* d = nullptr;
  for (const Dlopen& x : dlopens_)
    if (x.tid == tid && x.at <= at) d = &x;
  if (d != nullptr && !request.empty() && d->ev->name() == request &&
      (inner < 0 || d->at >= spans_[inner].start)) {
    c.set_dlopen_call(fmt::format("{}({})", d->ev->via().empty() ? "ctypes.CDLL" : d->ev->via(),
                                  Quote(d->ev->name())));
    if (d->ev->stack_size() > 0) *c.mutable_call_site() = Line(d->ev->stack(0));
    *mode = d->ev->has_mode() ? static_cast<int64_t>(d->ev->mode()) : -1;
  }
  return c;
}

bool PyAttribution::IsHookModule(std::string_view path) const {
  const std::string_view base = path.substr(path.rfind('/') + 1);
  for (const auto& m : hook_modules_)
    if (base.rfind(m + ".", 0) == 0) return true;
  return false;
}

void PyAttribution::Attribute(v1::Entry* en, const std::string& request, std::string_view object_path,
                              std::string_view requester_path) {
  if (!active_) return;
  const uint64_t at = p_->start_mono_ns() + en->offset_ns();
  if (en->has_load() && at < hook_ready_ns_ && IsHookModule(object_path)) {
    en->mutable_load()->mutable_python()->set_by_hook(true);
    return;
  }
  int64_t mode = -1;
  v1::PyCause c = CauseAt(at, en->tid(), request, &mode);
  if (c.ByteSizeLong() == 0) return;  // no cause: the field stays unset
  if (en->has_failed_dlopen()) {
    *en->mutable_failed_dlopen()->mutable_python() = std::move(c);
    return;
  }
  if (en->has_search()) {
    *en->mutable_search()->mutable_python() = std::move(c);
    return;
  }
  if (c.import_index() != 0) {
    v1::PyImportSpan* span = spans_[c.import_index() - 1].out;
    span->set_loads(span->loads() + 1);
  }
  v1::Load* l = en->mutable_load();
  *l->mutable_python() = std::move(c);
  // An import's flags are the mode of the import system's dlopen of an extension module
  // (requested by python itself or libpython), not of dlopens its C code makes.
  const std::string_view req = requester_path.substr(requester_path.rfind('/') + 1);
  const bool by_ctypes = !l->python().dlopen_call().empty();
  const bool by_import = !by_ctypes && l->reason() == v1::LOAD_DLOPEN &&
                         (req.rfind("python", 0) == 0 || req.rfind("libpython", 0) == 0);
  if (mode >= 0 && (by_ctypes || by_import)) l->set_dlopen_mode(static_cast<uint32_t>(mode));
}

}  // namespace ldscope::model
