// The `ldscope show` text: one block per process image, one line per loader action,
// indented detail lines for the candidates tried and the objects reused.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "render/python_text.h"
#include "render/render.h"
#include "text/escape.h"
#include "text/shown.h"
#include "text/strings.h"
#include "render/words.h"

namespace ldscope::render {
namespace {

// Rendering appends to one string, piece by piece, without a temporary per piece or a
// format string parsed per line: a big trace prints millions of lines. The model's
// strings are bytes: each is escaped as it is put in (text::AppendBytes, text::Show).

// An object's path (escaped), or what is known of it: a line's text.
void AppendName(std::string& out, const v1::ObjectRef& r) {
  if (!r.path().empty())
    text::AppendBytes(out, r.path());
  else if (r.id() == 0)
    out += "(unknown object)";
  else
    fmt::format_to(std::back_inserter(out), "(object {})", r.id());
}

// The same, as bytes: for text::Show.
std::string Name(const v1::ObjectRef& r) {
  if (!r.path().empty()) return r.path();
  return r.id() == 0 ? "(unknown object)" : fmt::format("(object {})", r.id());
}

// The timestamp column: "{:>10} " of "+{:.3f}ms" of the offset in ms, as fmt formats it;
// by integers where the decimal rounding cannot differ (a tie at the third decimal, or
// an offset so big that the double is coarser than a nanosecond, goes through fmt).
void AppendTime(std::string& out, const v1::Entry& e, const TextOptions& opt) {
  if (!opt.timestamps) return;
  const uint64_t ns = e.offset_ns();
  if (ns % 1000 == 500 || ns >= 1'000'000'000'000'000ull) {
    fmt::format_to(std::back_inserter(out), "{:>10} ", fmt::format("+{:.3f}ms", ns / 1e6));
    return;
  }
  const uint64_t us = ns / 1000 + (ns % 1000 > 500 ? 1 : 0);
  const fmt::format_int whole(us / 1000);
  const size_t width = 1 + whole.size() + 4 + 2;  // +W.FFFms
  if (width < 10) out.append(10 - width, ' ');
  out += '+';
  out.append(whole.data(), whole.size());
  const unsigned frac = static_cast<unsigned>(us % 1000);
  out += '.';
  out += static_cast<char>('0' + frac / 100);
  out += static_cast<char>('0' + frac / 10 % 10);
  out += static_cast<char>('0' + frac % 10);
  out += "ms ";
}

std::string Time(const v1::Entry& e, const TextOptions& opt) {
  std::string out;
  AppendTime(out, e, opt);
  return out;
}

// "[ns N] "
void AppendNs(std::string& out, const v1::ObjectRef& r) {
  out += "[ns ";
  const fmt::format_int n(r.lmid());
  out.append(n.data(), n.size());
  out += "] ";
}

std::string_view Pad(const TextOptions& opt) { return opt.timestamps ? "           " : ""; }

const char* Cut(const v1::Entry& e) { return e.truncated() ? "  [truncated]" : ""; }

// An ASCII word left-aligned in width columns (as fmt's "{:<width}").
void Padded(std::string& out, std::string_view word, size_t width) {
  out += word;
  if (word.size() < width) out.append(width - word.size(), ' ');
}

// "needed", "dlopen", "in link map", ...; "load" when the event did not say.
std::string ReasonWord(v1::LoadReason r) {
  if (r == v1::LOAD_REASON_UNSPECIFIED) return "load";
  std::string w = EnumWord(r);
  std::replace(w.begin(), w.end(), '-', ' ');
  return w;
}

void Tried(std::string& out, const google::protobuf::RepeatedPtrField<v1::Candidate>& tried,
           const TextOptions& opt) {
  for (const auto& c : tried) {
    out += Pad(opt);
    out += "      tried  ";
    Padded(out, CandidateWord(c), 16);
    out += ' ';
    text::AppendBytes(out, c.path());
    out += '\n';
  }
}

// The Python side of an entry, when the hook saw one.
void Python(std::string& out, const v1::PyCause& c, const std::string& cwd, const TextOptions& opt) {
  const std::string text = render::PyCauseText(c, cwd);
  if (!text.empty()) out += text::Show("{}      python {}\n", Pad(opt), text).str();
}

void RenderLoad(std::string& out, const v1::Entry& e, const std::string& cwd,
                const TextOptions& opt) {
  const auto& l = e.load();
  const auto& o = l.object();
  const auto soname = [&] {
    if (o.soname().empty()) return;
    out += " (soname ";
    text::AppendBytes(out, o.soname());
    out += ')';
  };
  AppendTime(out, e, opt);
  AppendNs(out, o);
  Padded(out, ReasonWord(l.reason()), 11);
  out += ' ';
  if (l.requested_name().empty()) {
    AppendName(out, o);
    soname();
  } else {
    text::AppendBytes(out, l.requested_name());
    out += "  requested by ";
    AppendName(out, l.requester());
  }
  out += Cut(e);
  out += '\n';
  if (!l.requested_name().empty()) {
    Tried(out, l.tried(), opt);
    out += Pad(opt);
    out += "      mapped ";
    AppendName(out, o);
    soname();
    if (l.rolled_back()) out += "  (rolled back: the dlopen failed)";
    out += '\n';
  }
  if (l.has_python()) Python(out, l.python(), cwd, opt);
  for (const auto& r : l.reused()) {
    // Worth a line by default: a name satisfied by a file of another name that an
    // earlier operation loaded (libnccl.so.2 -> libnccl.so.2.16.2): import order.
    const std::string& path = r.object().path();
    const std::string base = text::BaseName(path);
    if (!opt.verbose && (!r.loaded_earlier() || base == r.name())) continue;
    out += text::Show("{}      needs  {} -> already loaded {} ({} match, no search){}\n", Pad(opt), r.name(),
                      Name(r.object()), r.matched_by(), r.loaded_earlier() ? ", loaded by an earlier operation" : "")
               .str();
  }
}

using Sink = std::function<bool(const std::string&)>;

// Hands what is rendered so far (whole lines) to sink once it is big.
bool Spill(std::string& out, const Sink& sink) {
  if (out.size() < (1u << 20)) return true;
  const bool ok = sink(text::GuardLines(std::move(out)));
  out.clear();
  return ok;
}

// The Python line of a process the hook reported on: version, imports, losses.
void RenderPythonSummary(std::string& out, const v1::ProcessTimeline& p) {
  size_t failed = 0;
  for (const auto& i : p.imports()) failed += i.failed();
  out += text::Show(
             "  python {} ({}): {} imports, {} failed{}{}\n", p.python().version(), p.python().executable(),
             p.imports_size(), failed,
             p.python().dropped() + p.python().missing_seqs() == 0
                 ? ""
                 : fmt::format("; hook events dropped {}, missing {}", p.python().dropped(), p.python().missing_seqs()),
             p.python().truncated() == 0 ? "" : fmt::format("; {} hook events truncated", p.python().truncated()))
             .str();
}

// A process block's head: pid and executable, argv, how it started, LD_ variables,
// the Python summary.
void RenderHeader(std::string& out, const v1::ProcessTimeline& p) {
  text::Shown argv;  // a shell gives these words back as the original bytes
  for (const auto& a : p.argv()) {
    if (!argv.empty()) argv += " ";
    argv += text::ShellQuote(a);
  }
  std::string origin;
  if (p.start_reason() == v1::START_FORK)
    origin = fmt::format("forked from pid {}", p.ppid());
  else
    origin = fmt::format("{} (parent pid {})", StartWord(p.start_reason()), p.ppid());
  out += text::Show("process {}: {}\n", p.pid(), p.exe().empty() ? "(unknown)" : p.exe()).str();
  out += text::Show("  argv: {}\n", argv).str();
  if (p.start_truncated())
    out += "  [truncated] the start event was cut to fit: exe, cwd, argv or environment "
           "entries are cut short or missing\n";
  out += text::Show("  {} · glibc {} · cwd {}\n", origin, p.glibc_version(), p.cwd()).str();
  if (p.pid_namespace() != 0)
    out += fmt::format("  pid namespace {} (not the trace writer's): pids are as seen inside it\n",
                       p.pid_namespace());
  std::vector<std::pair<std::string, std::string>> env(p.env().begin(), p.env().end());
  std::sort(env.begin(), env.end());
  for (const auto& [k, v] : env)
    if (k.rfind("LD_", 0) == 0) out += text::Show("  {}={}\n", k, v).str();
  if (p.has_python()) RenderPythonSummary(out, p);
}

void RenderSearch(std::string& out, const v1::Entry& e, const std::string& cwd,
                  const TextOptions& opt) {
  const auto& s = e.search();
  AppendTime(out, e, opt);
  out += "       search ";
  text::AppendBytes(out, s.requested_name());
  out += "  requested by ";
  AppendName(out, s.requester());
  out += Cut(e);
  out += '\n';
  Tried(out, s.tried(), opt);
  out +=
      text::Show("{}      result {}{}\n", Pad(opt), s.outcome(), s.has_same_as() ? ": " + Name(s.same_as()) : "").str();
  if (s.has_python()) Python(out, s.python(), cwd, opt);
}

void RenderFailedDlopen(std::string& out, const v1::Entry& e, const std::string& cwd,
                        const TextOptions& opt) {
  const auto& f = e.failed_dlopen();
  out += text::Show("{}FAILED dlopen {}  requested by {}: rolled back\n", Time(e, opt),
                    f.requested_name().empty() ? "(unknown name)" : f.requested_name(), Name(f.requester()))
             .str();
  for (const auto& r : f.rolled_back()) out += text::Show("{}      unmap  {}\n", Pad(opt), Name(r)).str();
  if (f.has_python()) Python(out, f.python(), cwd, opt);
}

// One line (and its detail lines) per entry; unloads at exit are only counted in
// *exit_unloads unless verbose. False when the sink failed.
bool RenderEntries(std::string& out, const v1::ProcessTimeline& p, const TextOptions& opt,
                   const Sink& sink, size_t* exit_unloads) {
  for (const auto& e : p.entries()) {
    if (!Spill(out, sink)) return false;
    switch (e.kind_case()) {
      case v1::Entry::kLoad: RenderLoad(out, e, p.cwd(), opt); break;
      case v1::Entry::kSearch: RenderSearch(out, e, p.cwd(), opt); break;
      case v1::Entry::kUnload:
        if (e.unload().at_exit() && !opt.verbose) {
          ++*exit_unloads;
          break;
        }
        AppendTime(out, e, opt);
        AppendNs(out, e.unload().object());
        out += "unload      ";
        AppendName(out, e.unload().object());
        if (e.unload().at_exit()) out += " (at exit)";
        out += '\n';
        break;
      case v1::Entry::kFailedDlopen: RenderFailedDlopen(out, e, p.cwd(), opt); break;
      default: break;
    }
  }
  return true;
}

// How the process image ended (or that it did not, as far as the trace knows).
void RenderEnd(std::string& out, const v1::ProcessTimeline& p, size_t exit_unloads) {
  if (p.not_traced() == v1::NOT_TRACED_DESCRIPTOR_LIMIT)
    out += fmt::format(
        "  not traced: its descriptor limit ({}) leaves no descriptor the program "
        "could not get itself\n",
        p.fd_limit());
  else if (p.start_reason() == v1::START_SNAPSHOT)
    out +=
        p.snapshot().statically_linked()
            ? std::string("  snapshot: statically linked, no dynamic loader and no link map\n")
            : fmt::format("  snapshot: {} objects in {} namespace{} ({} read{} of its link maps, via {})\n",
                          p.loaded_at_end_size(), p.snapshot().namespaces(), p.snapshot().namespaces() == 1 ? "" : "s",
                          p.snapshot().tries(), p.snapshot().tries() == 1 ? "" : "s: changed while reading, retried",
                          p.snapshot().found_via());
  else if (p.exited())
    out += fmt::format("  exit: {} objects unloaded at exit\n", exit_unloads);
  else if (p.still_running())
    out += fmt::format(
        "  still running when recording stopped: later events are not in the "
        "trace; {} objects loaded then\n",
        p.loaded_at_end_size() + p.inherited_open_at_end());
  else if (p.untraced_after() && !p.exe_after().empty())
    out += text::Show(
               "  no exit event: the process went on running {}, not traced (no traced "
               "image of pid {} followed)\n",
               p.exe_after(), p.pid())
               .str();
  else if (p.untraced_after())
    out += fmt::format("  no exit event and no traced image of pid {} followed (_exit, a crash, "
                       "or an exec into a program not traced)\n", p.pid());
  else
    out += fmt::format(
        "  no normal exit seen (_exit, a crash, or exec): {} objects still "
        "loaded\n",
        p.loaded_at_end_size() + p.inherited_open_at_end());
}

// A process block's tail: the Python hook's silence, failed imports, the end, counts.
void RenderFooter(std::string& out, const v1::ProcessTimeline& p, size_t exit_unloads) {
  if (p.python_hook_silent())
    out += "  python: ldscope's Python hook did not report (python -I, -E or -S ignore it, or it could "
           "not connect): loads are not attributed to imports\n";
  // Failed imports that are not the optional probes Python makes itself.
  for (const auto& i : p.imports()) {
    if (!i.failed() || i.error().rfind("ModuleNotFoundError", 0) == 0) continue;
    out += text::Show("  import {} failed at {}: {}\n", i.module(), render::PyFrameText(i.site(), p.cwd()), i.error())
               .str();
  }
  RenderEnd(out, p, exit_unloads);
  out += fmt::format("  events {}, dropped {}, missing {}\n\n", p.events(), p.dropped(),
                     p.missing_seqs());
}

}  // namespace

bool ProcessTextWriter::Part(const v1::ProcessTimeline& p) {
  if (!begun_) {
    begun_ = true;
    exit_unloads_ = 0;
    RenderHeader(out_, p);
  }
  // A snapshot's objects were seen, not loaded, at the time of its read: no time column.
  if (p.start_reason() == v1::START_SNAPSHOT && opt_.timestamps) {
    TextOptions untimed = opt_;
    untimed.timestamps = false;
    return RenderEntries(out_, p, untimed, sink_, &exit_unloads_);
  }
  return RenderEntries(out_, p, opt_, sink_, &exit_unloads_);
}

bool ProcessTextWriter::Complete(const v1::ProcessTimeline& p) {
  if (!Part(p)) return false;
  RenderFooter(out_, p, exit_unloads_);
  begun_ = false;
  const bool ok = sink_(text::GuardLines(std::move(out_)));
  out_.clear();
  return ok;
}

bool TimelineText(const v1::Timeline& t, const TextOptions& opt,
                  const std::function<bool(const std::string&)>& sink) {
  ProcessTextWriter w(opt, sink);
  for (const auto& p : t.processes())
    if (!w.Complete(p)) return false;
  return TimelineTailText(t, opt, sink);
}

bool TimelineTailText(const v1::Timeline& t, const TextOptions& opt,
                      const std::function<bool(const std::string&)>& sink) {
  std::string out;
  const v1::CollectorSummary& c = t.collector();
  if (c.still_running() > 0)
    out += fmt::format("collector: {} process image(s) still running when recording stopped\n",
                       c.still_running());
  if (c.held_by_children() > 0)
    out += fmt::format("collector: {} connection(s) still held by forked children that had sent "
                       "nothing (running, not traced)\n", c.held_by_children());
  if (c.untraced_after() > 0)
    out += fmt::format("collector: {} process image(s) ended without an exit event and no "
                       "traced image followed\n", c.untraced_after());
  if (c.accept_deferred() > 0)
    out += fmt::format("collector: descriptor limit {} reached {} time(s); connections waited "
                       "for a free descriptor\n", c.fd_limit(), c.accept_deferred());
  if (c.refused() > 0)
    out += fmt::format("collector: {} connection(s) refused for want of a descriptor\n",
                       c.refused());
  for (const auto& pr : t.problems()) {
    if (!opt.problems) break;
    out += "error: " + text::DamageText(pr.file(), pr.offset(), pr.message()) + "\n";
  }
  return sink(text::GuardLines(std::move(out)));
}

std::string TimelineText(const v1::Timeline& t, const TextOptions& opt) {
  std::string out;
  TimelineText(t, opt, [&](const std::string& piece) {
    out += piece;
    return true;
  });
  return out;
}

}  // namespace ldscope::render
