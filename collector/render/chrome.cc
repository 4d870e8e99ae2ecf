// The Chrome trace-event format (opens in Perfetto's UI and chrome://tracing): one
// track per process and thread, a span for each dlopen and each Python import with the
// loads it caused inside it, instant markers for failed dlopens and for findings.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "render/render.h"

namespace ldscope::render {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Base(const std::string& p) { return p.substr(p.rfind('/') + 1); }

}  // namespace

std::string ChromeTrace(const v1::Timeline& t, const v1::Report& findings) {
  uint64_t origin = UINT64_MAX;
  for (const auto& p : t.processes()) origin = std::min(origin, p.start_mono_ns());
  if (origin == UINT64_MAX) origin = 0;
  std::vector<std::string> ev;
  auto us = [&](const v1::ProcessTimeline& p, uint64_t offset_ns) {
    return static_cast<double>(p.start_mono_ns() + offset_ns - origin) / 1000.0;
  };
  for (const auto& p : t.processes()) {
    std::string argv;
    for (const auto& a : p.argv()) argv += (argv.empty() ? "" : " ") + a;
    ev.push_back(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})",
                             p.pid(), JsonString(fmt::format("{} {}", p.pid(), argv))));
    std::map<uint32_t, bool> threads;
    const int n = p.entries_size();
    for (int i = 0; i < n; ++i) {
      const auto& e = p.entries(i);
      threads[e.tid()] = true;
      const double ts = us(p, e.offset_ns());
      // Where this entry's work ends: the next entry of the same thread, or a hair later.
      double end = ts + 1;
      for (int j = i + 1; j < n; ++j)
        if (p.entries(j).tid() == e.tid()) {
          end = std::max(ts + 1, us(p, p.entries(j).offset_ns()));
          break;
        }
      if (e.has_load()) {
        const auto& l = e.load();
        if (l.reason() == v1::LOAD_DLOPEN || l.reason() == v1::LOAD_PRELOAD) {
          // The dlopen spans its own load and the NEEDED loads that follow it.
          double span_end = end;
          for (int j = i + 1; j < n && p.entries(j).has_load() &&
                              p.entries(j).load().reason() == v1::LOAD_NEEDED;
               ++j) {
            span_end = j + 1 < n ? std::max(span_end, us(p, p.entries(j + 1).offset_ns()))
                                 : span_end + 1;
          }
          ev.push_back(fmt::format(
              R"({{"ph":"X","cat":"dlopen","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"requested":{},"requester":{},"rolled_back":{}}}}})",
              JsonString(l.python().dlopen_call().empty() ? "dlopen " + Base(l.requested_name())
                                                          : l.python().dlopen_call()),
              p.pid(), e.tid(), ts, span_end - ts,
              JsonString(l.requested_name()), JsonString(l.requester().path()),
              l.rolled_back() ? "true" : "false"));
        }
        ev.push_back(fmt::format(
            R"({{"ph":"X","cat":"load","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"path":{},"soname":{},"namespace":{}}}}})",
            JsonString(Base(l.object().path())), p.pid(), e.tid(), ts, std::max(1.0, end - ts) * 0.999,
            JsonString(l.object().path()), JsonString(l.object().soname()), l.object().lmid()));
      } else if (e.has_failed_dlopen()) {
        ev.push_back(fmt::format(
            R"({{"ph":"i","s":"t","cat":"failure","name":{},"pid":{},"tid":{},"ts":{:.3f}}})",
            JsonString("FAILED dlopen " + Base(e.failed_dlopen().requested_name())), p.pid(),
            e.tid(), ts));
      } else if (e.has_unload() && !e.unload().at_exit()) {
        ev.push_back(fmt::format(
            R"({{"ph":"i","s":"t","cat":"unload","name":{},"pid":{},"tid":{},"ts":{:.3f}}})",
            JsonString("unload " + Base(e.unload().object().path())), p.pid(), e.tid(), ts));
      }
    }
    // Python imports (from ldscope's hook): a span each, nested as they ran, on their
    // thread's track; the loads they caused fall inside them.
    for (const auto& im : p.imports()) {
      threads[im.tid()] = true;
      const double ts = us(p, im.start_offset_ns());
      uint64_t end_ns = im.ended() ? im.end_offset_ns() : im.start_offset_ns();
      if (!im.ended())  // still running at the end of the trace: up to its last event
        for (const auto& e : p.entries()) end_ns = std::max(end_ns, e.offset_ns());
      ev.push_back(fmt::format(
          R"({{"ph":"X","cat":"import","name":{},"pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"module":{},"site":{},"loads":{},"failed":{},"error":{}}}}})",
          JsonString("import " + im.module()), p.pid(), im.tid(), ts,
          std::max(0.001, us(p, end_ns) - ts), JsonString(im.module()),
          JsonString(fmt::format("{}:{}", im.site().file(), im.site().line())), im.loads(),
          im.failed() ? "true" : "false", JsonString(im.error())));
    }
    for (const auto& [tid, _] : threads)
      ev.push_back(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                               p.pid(), tid, JsonString(fmt::format("thread {}", tid))));
    // Findings, as process-wide markers at the event they rest on.
    for (const auto& f : findings.findings()) {
      if (f.stream() != p.stream()) continue;
      uint64_t at = 0;
      for (const auto& o : f.objects())
        for (const auto& e : p.entries())
          if (o.seq() != 0 && e.seq() == o.seq()) at = std::max(at, e.offset_ns());
      ev.push_back(fmt::format(
          R"({{"ph":"i","s":"p","cat":"finding","name":{},"pid":{},"tid":0,"ts":{:.3f},"args":{{"message":{}}}}})",
          JsonString(FindingKindName(f.kind())), p.pid(), us(p, at), JsonString(f.headline())));
    }
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < ev.size(); ++i) out += ev[i] + (i + 1 < ev.size() ? ",\n" : "\n");
  return out + "]}\n";
}

}  // namespace ldscope::render
