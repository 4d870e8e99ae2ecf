// The Chrome trace-event format (opens in Perfetto's UI and chrome://tracing): one
// track per process and thread, a span for each dlopen and each Python import with the
// loads it caused inside it, instant markers for failed dlopens and for findings. The
// spans of a track nest (NestSlices); one that would overlap its parent is async.
//
// The document is a google::protobuf::Struct printed by protobuf's JSON writer, as the
// other JSON outputs are, from the timeline with its byte strings escaped
// (ShownTimeline), so the JSON holds them losslessly. Keys come out sorted (deterministic serialization), so the
// same trace always gives the same bytes.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>

#include "render/render.h"
#include "text/strings.h"

namespace ldscope::render {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;

// Chrome's unit is the microsecond; a nanosecond's precision (3 decimals) is plenty.
double Micros(double us) { return std::round(us * 1000.0) / 1000.0; }

// One trace event: its phase, category (may be empty), name, and track.
Struct Event(const char* ph, const char* cat, const std::string& name, uint32_t pid, uint32_t tid) {
  Struct ev;
  auto& f = *ev.mutable_fields();
  f["ph"].set_string_value(ph);
  if (*cat != '\0') f["cat"].set_string_value(cat);
  f["name"].set_string_value(name);
  f["pid"].set_number_value(pid);
  f["tid"].set_number_value(tid);
  return ev;
}

// A span from ts lasting dur, or (dur < 0) an instant of scope s ("t" thread, "p" process).
void At(Struct* ev, double ts, double dur, const char* scope = "") {
  auto& f = *ev->mutable_fields();
  f["ts"].set_number_value(Micros(ts));
  if (dur >= 0) f["dur"].set_number_value(Micros(dur));
  if (*scope != '\0') f["s"].set_string_value(scope);
}

Struct& Args(Struct* ev) { return *(*ev->mutable_fields())["args"].mutable_struct_value(); }
void Arg(Struct* ev, const char* key, const std::string& v) { (*Args(ev).mutable_fields())[key].set_string_value(v); }
void Arg(Struct* ev, const char* key, double v) { (*Args(ev).mutable_fields())[key].set_number_value(v); }
void Flag(Struct* ev, const char* key, bool v) { (*Args(ev).mutable_fields())[key].set_bool_value(v); }

// The events of one trace, on a time axis that starts at the earliest process image.
class ChromeEvents {
 public:
  explicit ChromeEvents(const v1::Timeline& t) {
    for (const auto& p : t.processes()) origin_ = std::min(origin_, p.start_mono_ns());
    if (origin_ == UINT64_MAX) origin_ = 0;
  }

  void AddProcess(const v1::ProcessTimeline& p, const v1::Report& findings);
  ListValue& list() { return list_; }

 private:
  double Us(const v1::ProcessTimeline& p, uint64_t offset_ns) const {
    return static_cast<double>(p.start_mono_ns() + offset_ns - origin_) / 1000.0;
  }
  void Add(Struct ev) { *list_.add_values()->mutable_struct_value() = std::move(ev); }
  void AddEntry(const v1::ProcessTimeline& p, int i);
  void AddLoad(const v1::ProcessTimeline& p, int i, double ts, double end);
  void AddImport(const v1::ProcessTimeline& p, const v1::PyImportSpan& im);
  void AddFinding(const v1::ProcessTimeline& p, const v1::Finding& f);

  uint64_t origin_ = UINT64_MAX;
  ListValue list_;
};

void ChromeEvents::AddProcess(const v1::ProcessTimeline& p, const v1::Report& findings) {
  Struct name = Event("M", "", "process_name", p.pid(), 0);
  Arg(&name, "name", fmt::format("{} {}", p.pid(), fmt::join(p.argv(), " ")));
  Add(std::move(name));
  std::map<uint32_t, bool> threads;
  for (int i = 0; i < p.entries_size(); ++i) {
    threads[p.entries(i).tid()] = true;
    AddEntry(p, i);
  }
  // Python imports (from ldscope's hook): a span each, nested as they ran, on their
  // thread's track; the loads they caused fall inside them.
  for (const auto& im : p.imports()) {
    threads[im.tid()] = true;
    AddImport(p, im);
  }
  for (const auto& [tid, _] : threads) {
    Struct thread = Event("M", "", "thread_name", p.pid(), tid);
    Arg(&thread, "name", fmt::format("thread {}", tid));
    Add(std::move(thread));
  }
  for (const auto& f : findings.findings())
    if (f.stream() == p.stream()) AddFinding(p, f);
}

void ChromeEvents::AddEntry(const v1::ProcessTimeline& p, int i) {
  const auto& e = p.entries(i);
  const double ts = Us(p, e.offset_ns());
  // Where this entry's work ends: the next entry of the same thread, or a hair later.
  double end = ts + 1;
  for (int j = i + 1; j < p.entries_size(); ++j)
    if (p.entries(j).tid() == e.tid()) {
      end = std::max(ts + 1, Us(p, p.entries(j).offset_ns()));
      break;
    }
  if (e.has_load()) {
    AddLoad(p, i, ts, end);
  } else if (e.has_failed_dlopen()) {
    Struct ev = Event("i", "failure", "FAILED dlopen " + text::BaseName(e.failed_dlopen().requested_name()),
                      p.pid(), e.tid());
    At(&ev, ts, -1, "t");
    Add(std::move(ev));
  } else if (e.has_unload() && !e.unload().at_exit()) {
    Struct ev = Event("i", "unload", "unload " + text::BaseName(e.unload().object().path()), p.pid(), e.tid());
    At(&ev, ts, -1, "t");
    Add(std::move(ev));
  }
}

void ChromeEvents::AddLoad(const v1::ProcessTimeline& p, int i, double ts, double end) {
  const auto& e = p.entries(i);
  const auto& l = e.load();
  if (l.reason() == v1::LOAD_DLOPEN || l.reason() == v1::LOAD_PRELOAD) {
    // The dlopen spans its own load and the NEEDED loads that follow it.
    const int n = p.entries_size();
    double span_end = end;
    for (int j = i + 1; j < n && p.entries(j).has_load() && p.entries(j).load().reason() == v1::LOAD_NEEDED; ++j)
      span_end = j + 1 < n ? std::max(span_end, Us(p, p.entries(j + 1).offset_ns())) : span_end + 1;
    const std::string name = l.python().dlopen_call().empty() ? "dlopen " + text::BaseName(l.requested_name())
                                                              : l.python().dlopen_call();
    Struct span = Event("X", "dlopen", name, p.pid(), e.tid());
    At(&span, ts, span_end - ts);
    Arg(&span, "requested", l.requested_name());
    Arg(&span, "requester", l.requester().path());
    Flag(&span, "rolled_back", l.rolled_back());
    Add(std::move(span));
  }
  Struct load = Event("X", "load", text::BaseName(l.object().path()), p.pid(), e.tid());
  At(&load, ts, std::max(1.0, end - ts) * 0.999);
  Arg(&load, "path", l.object().path());
  Arg(&load, "soname", l.object().soname());
  Arg(&load, "namespace", static_cast<double>(l.object().lmid()));
  Add(std::move(load));
}

void ChromeEvents::AddImport(const v1::ProcessTimeline& p, const v1::PyImportSpan& im) {
  const double ts = Us(p, im.start_offset_ns());
  uint64_t end_ns = im.ended() ? im.end_offset_ns() : im.start_offset_ns();
  if (!im.ended())  // still running at the end of the trace: up to its last event
    for (const auto& e : p.entries()) end_ns = std::max(end_ns, e.offset_ns());
  Struct ev = Event("X", "import", "import " + im.module(), p.pid(), im.tid());
  At(&ev, ts, std::max(0.001, Us(p, end_ns) - ts));
  Arg(&ev, "module", im.module());
  Arg(&ev, "site", fmt::format("{}:{}", im.site().file(), im.site().line()));
  Arg(&ev, "loads", static_cast<double>(im.loads()));
  Flag(&ev, "failed", im.failed());
  Arg(&ev, "error", im.error());
  Add(std::move(ev));
}

// A finding, as a process-wide marker at the latest event it rests on.
void ChromeEvents::AddFinding(const v1::ProcessTimeline& p, const v1::Finding& f) {
  uint64_t at = 0;
  for (const auto& o : f.objects())
    for (const auto& e : p.entries())
      if (o.seq() != 0 && e.seq() == o.seq()) at = std::max(at, e.offset_ns());
  Struct ev = Event("i", "finding", FindingKindName(f.kind()), p.pid(), 0);
  At(&ev, Us(p, at), -1, "p");
  Arg(&ev, "message", f.headline());
  Add(std::move(ev));
}

// The complete ("X") slices of each thread's track, nested: Perfetto draws a track's
// slices as a stack, and a slice that starts inside another and ends after it breaks
// the stack (a load's end is where the thread's next event is, which can lie past an
// import's). Such a slice becomes an async pair ("b" and "e", an id of its own) on its
// process: the same name, times and arguments, on a track of its own.
void NestSlices(ListValue* events) {
  struct Slice {
    double ts, end;
    int index;
  };
  const auto num = [](const Struct& ev, const char* key) {
    auto it = ev.fields().find(key);
    return it == ev.fields().end() ? 0.0 : it->second.number_value();
  };
  std::map<std::pair<double, double>, std::vector<Slice>> tracks;  // (pid, tid)
  for (int i = 0; i < events->values_size(); ++i) {
    const Struct& ev = events->values(i).struct_value();
    if (ev.fields().at("ph").string_value() != "X") continue;
    const double ts = num(ev, "ts");
    tracks[{num(ev, "pid"), num(ev, "tid")}].push_back({ts, ts + num(ev, "dur"), i});
  }
  constexpr double kSlack = 1e-6;  // a nanosecond's rounding in microseconds
  int next_id = 1;
  std::vector<Struct> ends;
  for (auto& [track, slices] : tracks) {
    std::stable_sort(slices.begin(), slices.end(),
                     [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
    std::vector<double> open;  // the ends of the slices that hold the current one
    for (const Slice& s : slices) {
      while (!open.empty() && open.back() <= s.ts + kSlack) open.pop_back();
      if (open.empty() || s.end <= open.back() + kSlack) {
        open.push_back(s.end);
        continue;
      }
      Struct& ev = *events->mutable_values(s.index)->mutable_struct_value();
      auto& f = *ev.mutable_fields();
      f.erase("dur");
      f["ph"].set_string_value("b");
      f["id"].set_number_value(next_id);
      Struct end;
      auto& e = *end.mutable_fields();
      for (const char* key : {"cat", "name", "pid", "tid"})
        if (f.count(key) != 0) e[key] = f[key];
      e["ph"].set_string_value("e");
      e["id"].set_number_value(next_id++);
      e["ts"].set_number_value(Micros(s.end));
      ends.push_back(std::move(end));
    }
  }
  for (auto& e : ends) *events->add_values()->mutable_struct_value() = std::move(e);
}

}  // namespace

std::string ChromeTrace(const v1::Timeline& model, const v1::Report& findings) {
  const v1::Timeline t = ShownTimeline(model);
  ChromeEvents events(t);
  for (const auto& p : t.processes()) events.AddProcess(p, findings);
  Struct doc;
  auto& f = *doc.mutable_fields();
  f["displayTimeUnit"].set_string_value("ms");
  NestSlices(&events.list());
  *f["traceEvents"].mutable_list_value() = std::move(events.list());
  return ProtoJson(doc);  // keys sorted (see render::ProtoJson)
}

}  // namespace ldscope::render
