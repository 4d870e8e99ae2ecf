// See otlp.h.
#include "render/otlp.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "render/render.h"
#include "text/strings.h"
#include "render/words.h"

namespace ldscope::render {
namespace {

namespace common = opentelemetry::proto::common::v1;
namespace trace = opentelemetry::proto::trace::v1;
namespace logs = opentelemetry::proto::logs::v1;

constexpr const char* kScope = "ldscope";

// The rank and job variables a fleet tells its processes apart by (when the process had
// them: the audit library records these among the loader-relevant ones).
constexpr const char* kJobVariables[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "GITHUB_RUN_ID", "CI_JOB_ID"};

// 64-bit FNV-1a over the parts, then splitmix64's finaliser: stable across machines and
// builds, never zero (a zero id is invalid in OTLP).
uint64_t Hash(std::initializer_list<std::string> parts) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& s : parts) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;  // separator: ("ab","c") != ("a","bc")
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

std::string Bytes8(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}


void Attr(google::protobuf::RepeatedPtrField<common::KeyValue>* a, const std::string& key,
          const std::string& value) {
  auto* kv = a->Add();
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}
void AttrInt(google::protobuf::RepeatedPtrField<common::KeyValue>* a, const std::string& key,
             int64_t value) {
  auto* kv = a->Add();
  kv->set_key(key);
  kv->mutable_value()->set_int_value(value);
}
void AttrBool(google::protobuf::RepeatedPtrField<common::KeyValue>* a, const std::string& key,
              bool value) {
  auto* kv = a->Add();
  kv->set_key(key);
  kv->mutable_value()->set_bool_value(value);
}
void AttrList(google::protobuf::RepeatedPtrField<common::KeyValue>* a, const std::string& key,
              const std::vector<std::string>& values) {
  auto* kv = a->Add();
  kv->set_key(key);
  auto* arr = kv->mutable_value()->mutable_array_value();
  for (const auto& v : values) arr->add_values()->set_string_value(v);
}

std::string ReasonName(v1::LoadReason r) { return EnumWord(r); }

void SiteAttrs(google::protobuf::RepeatedPtrField<common::KeyValue>* a, const v1::SourceLine& s) {
  if (s.file().empty()) return;
  Attr(a, "code.file.path", s.file());
  AttrInt(a, "code.line.number", s.line());
  if (!s.function().empty()) Attr(a, "code.function.name", s.function());
}

// Builds the spans of one process image.
class ProcessSpans {
 public:
  ProcessSpans(const v1::ProcessTimeline& p, const std::string& trace_id, uint64_t seed,
               std::function<uint64_t(uint64_t)> unix_ns)
      : p_(p), trace_id_(trace_id), seed_(seed), unix_(std::move(unix_ns)) {}

  std::string SpanId(const std::string& what, uint64_t n) const {
    return Bytes8(Hash({std::to_string(seed_), OtlpProcessKey(p_), what, std::to_string(n)}));
  }
  std::string ProcessSpanId() const { return SpanId("process", 0); }

  // Fills spans; parent_span: the image that started this one ("" for none).
  void Build(const std::string& parent_span, google::protobuf::RepeatedPtrField<trace::Span>* out) {
    const uint64_t last = LastOffset();
    AddProcessSpan(parent_span, last, out);
    AddImportSpans(last, out);
    AddEntries(out);
    SetEnds(out);
  }

  // The span a finding's evidence (its objects' loads) lies in: the latest one.
  std::string SpanOfFinding(const v1::Finding& f, const google::protobuf::RepeatedPtrField<trace::Span>& spans,
                            uint64_t* time_unix_ns) const {
    uint64_t best_seq = 0;
    for (const auto& o : f.objects())
      if (owner_of_seq_.count(o.seq())) best_seq = std::max(best_seq, o.seq());
    for (uint64_t s : f.evidence())
      if (owner_of_seq_.count(s)) best_seq = std::max(best_seq, s);
    int idx = index_of_process_span_;
    *time_unix_ns = spans[idx].start_time_unix_nano();
    if (best_seq != 0) {
      idx = owner_of_seq_.at(best_seq);
      for (const auto& e : p_.entries())
        if (e.seq() == best_seq) *time_unix_ns = unix_(e.offset_ns());
    }
    return spans[idx].span_id();
  }

 private:
  // The latest time the image's entries and imports tell of.
  uint64_t LastOffset() const {
    uint64_t last = 0;
    for (const auto& e : p_.entries()) last = std::max(last, e.offset_ns());
    for (const auto& im : p_.imports())
      last = std::max(last, im.ended() ? im.end_offset_ns() : im.start_offset_ns());
    return last;
  }

  void AddProcessSpan(const std::string& parent_span, uint64_t last,
                      google::protobuf::RepeatedPtrField<trace::Span>* out) {
    trace::Span* proc = NewSpan(out, ProcessSpanId(), parent_span,
                                fmt::format("{} {}", p_.start_reason() == v1::START_REASON_UNSPECIFIED ? "process" : StartWord(p_.start_reason()),
                                            text::BaseName(p_.exe())),
                                0, std::max<uint64_t>(last, 1000));
    auto* pa = proc->mutable_attributes();
    Attr(pa, "ldscope.process.start_reason", StartWord(p_.start_reason()));
    AttrInt(pa, "ldscope.process.stream", p_.stream());
    AttrInt(pa, "ldscope.process.events", static_cast<int64_t>(p_.events()));
    AttrInt(pa, "ldscope.process.dropped_events", static_cast<int64_t>(p_.dropped()));
    AttrInt(pa, "ldscope.process.missing_events", static_cast<int64_t>(p_.missing_seqs()));
    AttrBool(pa, "ldscope.process.exited", p_.exited());
    if (p_.still_running()) AttrBool(pa, "ldscope.process.still_running", true);
    if (p_.untraced_after()) Attr(pa, "ldscope.process.untraced_after", p_.exe_after());
    if (!p_.glibc_version().empty()) Attr(pa, "ldscope.process.glibc_version", p_.glibc_version());
    if (p_.has_python() && !p_.python().version().empty())
      Attr(pa, "ldscope.python.version", p_.python().version());
    index_of_process_span_ = out->size() - 1;
  }

  // Python imports: a span each, under the enclosing import or the process; an import
  // that did not end lasts until last.
  void AddImportSpans(uint64_t last, google::protobuf::RepeatedPtrField<trace::Span>* out) {
    const int ni = p_.imports_size();
    for (int i = 0; i < ni; ++i) {
      const auto& im = p_.imports(i);
      const std::string parent =
          im.parent() > 0 ? SpanId("import", im.parent()) : ProcessSpanId();
      const uint64_t end = im.ended() ? im.end_offset_ns() : last;
      trace::Span* s = NewSpan(out, SpanId("import", static_cast<uint64_t>(i + 1)), parent,
                               "import " + im.module(), im.start_offset_ns(),
                               std::max(end, im.start_offset_ns()));
      auto* a = s->mutable_attributes();
      Attr(a, "ldscope.python.module", im.module());
      AttrInt(a, "thread.id", im.tid());
      SiteAttrs(a, im.site());
      AttrInt(a, "ldscope.python.loads", im.loads());
      if (!im.ended()) AttrBool(a, "ldscope.python.import_unfinished", true);
      if (im.failed()) {
        s->mutable_status()->set_code(trace::Status::STATUS_CODE_ERROR);
        s->mutable_status()->set_message(im.error());
      }
      import_span_[static_cast<uint32_t>(i + 1)] = out->size() - 1;
    }
  }

  // Entries: a span per dlopen (with the NEEDED loads and searches that follow it on
  // its thread), the rest as events of the import or process span.
  void AddEntries(google::protobuf::RepeatedPtrField<trace::Span>* out) {
    std::map<uint32_t, int> open_dlopen;  // tid -> index into out
    const int n = p_.entries_size();
    for (int i = 0; i < n; ++i) {
      const auto& e = p_.entries(i);
      int owner = OpenDlopenHolding(e, &open_dlopen);
      if (owner < 0 && e.has_load() && e.load().reason() == v1::LOAD_DLOPEN) {
        owner = AddDlopenSpan(e, out);
        open_dlopen[e.tid()] = owner;
      }
      if (owner < 0 && e.has_failed_dlopen()) owner = AddFailedDlopenSpan(e, out);
      if (owner < 0) owner = ImportOrProcessSpan(e);
      AddEvent(&(*out)[owner], e);
      if (e.has_failed_dlopen()) {
        (*out)[owner].mutable_status()->set_code(trace::Status::STATUS_CODE_ERROR);
        (*out)[owner].mutable_status()->set_message("dlopen failed: " + e.failed_dlopen().requested_name());
      }
      owner_of_seq_[e.seq()] = owner;
    }
  }

  // The dlopen span open on e's thread when e continues it (a NEEDED load, a search,
  // the failure of that dlopen), else -1 and the thread's dlopen span is closed.
  int OpenDlopenHolding(const v1::Entry& e, std::map<uint32_t, int>* open_dlopen) {
    auto it = open_dlopen->find(e.tid());
    if (it == open_dlopen->end()) return -1;
    const bool continues =
        (e.has_load() && e.load().reason() == v1::LOAD_NEEDED) || e.has_search() ||
        (e.has_failed_dlopen() &&
         e.failed_dlopen().requested_name() == dlopen_name_[it->second]);
    if (continues) return it->second;
    open_dlopen->erase(it);
    return -1;
  }

  // A span for the dlopen that loaded e; returns its index.
  int AddDlopenSpan(const v1::Entry& e, google::protobuf::RepeatedPtrField<trace::Span>* out) {
    const auto& l = e.load();
    const std::string name = l.python().dlopen_call().empty() ? "dlopen " + text::BaseName(l.requested_name())
                                                              : l.python().dlopen_call();
    trace::Span* s = NewSpan(out, SpanId("dlopen", e.seq()), ParentOf(l.python(), *out), name,
                             e.offset_ns(), e.offset_ns() + 1000);
    auto* a = s->mutable_attributes();
    Attr(a, "ldscope.dlopen.requested", l.requested_name());
    Attr(a, "ldscope.dlopen.requester", l.requester().path());
    AttrInt(a, "thread.id", e.tid());
    if (l.has_dlopen_mode()) AttrInt(a, "ldscope.dlopen.mode", l.dlopen_mode());
    SiteAttrs(a, l.python().call_site());
    const int index = out->size() - 1;
    dlopen_name_[index] = l.requested_name();
    return index;
  }

  // A dlopen that failed before mapping anything (not found): a span of its own.
  int AddFailedDlopenSpan(const v1::Entry& e, google::protobuf::RepeatedPtrField<trace::Span>* out) {
    const auto& f = e.failed_dlopen();
    trace::Span* s = NewSpan(out, SpanId("failed-dlopen", e.seq()), ParentOf(f.python(), *out),
                             f.python().dlopen_call().empty() ? "dlopen " + text::BaseName(f.requested_name())
                                                              : f.python().dlopen_call(),
                             e.offset_ns(), e.offset_ns() + 1000);
    auto* a = s->mutable_attributes();
    Attr(a, "ldscope.dlopen.requested", f.requested_name());
    Attr(a, "ldscope.dlopen.requester", f.requester().path());
    AttrInt(a, "thread.id", e.tid());
    SiteAttrs(a, f.python().call_site());
    return out->size() - 1;
  }

  // The span of the import that caused e, else the process span.
  int ImportOrProcessSpan(const v1::Entry& e) const {
    const v1::PyCause* cause = e.has_load() ? &e.load().python()
                               : e.has_search() ? &e.search().python()
                                                : nullptr;
    if (cause != nullptr && cause->import_index() > 0) {
      auto im = import_span_.find(cause->import_index());
      if (im != import_span_.end()) return im->second;
    }
    return index_of_process_span_;
  }

  // A dlopen span ends with the last load, search or failure it holds (the loader
  // reports no end of its own): 1 µs after it.
  // The process span holds them all.
  void SetEnds(google::protobuf::RepeatedPtrField<trace::Span>* out) {
    auto& proc_span = (*out)[index_of_process_span_];
    uint64_t proc_end = proc_span.end_time_unix_nano();
    for (int i = index_of_process_span_; i < out->size(); ++i) {
      auto& s = (*out)[i];
      uint64_t end = s.end_time_unix_nano();
      for (const auto& ev : s.events())
        end = std::max(end, ev.time_unix_nano() + (i == index_of_process_span_ ? 0 : 1000));
      s.set_end_time_unix_nano(end);
      proc_end = std::max(proc_end, end);
    }
    proc_span.set_end_time_unix_nano(proc_end);
  }

  std::string ParentOf(const v1::PyCause& c, const google::protobuf::RepeatedPtrField<trace::Span>& spans) const {
    if (c.import_index() > 0) {
      auto im = import_span_.find(c.import_index());
      if (im != import_span_.end()) return spans[im->second].span_id();
    }
    return ProcessSpanId();
  }
  trace::Span* NewSpan(google::protobuf::RepeatedPtrField<trace::Span>* out, const std::string& id,
                       const std::string& parent, const std::string& name, uint64_t start_offset,
                       uint64_t end_offset) {
    trace::Span* s = out->Add();
    s->set_trace_id(trace_id_);
    s->set_span_id(id);
    if (!parent.empty()) s->set_parent_span_id(parent);
    s->set_name(name);
    s->set_kind(trace::Span::SPAN_KIND_INTERNAL);
    s->set_start_time_unix_nano(unix_(start_offset));
    s->set_end_time_unix_nano(unix_(end_offset));
    return s;
  }
  void AddEvent(trace::Span* s, const v1::Entry& e) {
    trace::Span::Event* ev = nullptr;
    auto add = [&](const std::string& name) {
      ev = s->add_events();
      ev->set_time_unix_nano(unix_(e.offset_ns()));
      ev->set_name(name);
      return ev->mutable_attributes();
    };
    if (e.has_load()) {
      const auto& l = e.load();
      auto* a = add("load");
      Attr(a, "ldscope.object.path", l.object().path());
      if (!l.object().soname().empty()) Attr(a, "ldscope.object.soname", l.object().soname());
      Attr(a, "ldscope.load.reason", ReasonName(l.reason()));
      if (!l.requested_name().empty()) Attr(a, "ldscope.load.requested", l.requested_name());
      if (!l.requester().path().empty()) Attr(a, "ldscope.load.requester", l.requester().path());
      if (!l.tried().empty()) Attr(a, "ldscope.load.found_by", FoundByWord(l));
      if (l.object().lmid() != 0) AttrInt(a, "ldscope.object.namespace", l.object().lmid());
      if (!l.build_id().empty()) Attr(a, "ldscope.object.build_id", l.build_id());
      if (l.rolled_back()) AttrBool(a, "ldscope.load.rolled_back", true);
    } else if (e.has_search()) {
      const auto& r = e.search();
      auto* a = add("search");
      Attr(a, "ldscope.load.requested", r.requested_name());
      if (!r.requester().path().empty()) Attr(a, "ldscope.load.requester", r.requester().path());
      Attr(a, "ldscope.search.outcome", r.outcome());
      AttrInt(a, "ldscope.search.candidates", r.tried_size());
      if (!r.same_as().path().empty()) Attr(a, "ldscope.search.same_as", r.same_as().path());
    } else if (e.has_failed_dlopen()) {
      const auto& f = e.failed_dlopen();
      auto* a = add("dlopen failed");
      Attr(a, "ldscope.dlopen.requested", f.requested_name());
      std::vector<std::string> rolled;
      for (const auto& o : f.rolled_back()) rolled.push_back(o.path());
      if (!rolled.empty()) AttrList(a, "ldscope.dlopen.rolled_back", rolled);
    } else if (e.has_unload()) {
      if (e.unload().at_exit()) return;  // every object at exit: noise
      auto* a = add("unload");
      Attr(a, "ldscope.object.path", e.unload().object().path());
    } else {
      return;
    }
    auto* a = ev->mutable_attributes();
    AttrInt(a, "thread.id", e.tid());
    AttrInt(a, "ldscope.seq", static_cast<int64_t>(e.seq()));
    if (e.truncated()) AttrBool(a, "ldscope.truncated", true);
  }

  const v1::ProcessTimeline& p_;
  std::string trace_id_;
  uint64_t seed_;
  std::function<uint64_t(uint64_t)> unix_;
  int index_of_process_span_ = 0;
  std::map<uint32_t, int> import_span_;
  std::map<int, std::string> dlopen_name_;
  std::map<uint64_t, int> owner_of_seq_;
};

void ResourceOf(const v1::ProcessTimeline* p, const std::string& host,
                opentelemetry::proto::resource::v1::Resource* r) {
  auto* a = r->mutable_attributes();
  Attr(a, "service.name", p != nullptr && !p->exe().empty() ? text::BaseName(p->exe()) : "ldscope");
  if (!host.empty()) Attr(a, "host.name", host);
  if (p == nullptr) return;
  AttrInt(a, "process.pid", p->pid());
  if (p->ppid() > 0) AttrInt(a, "process.parent_pid", p->ppid());
  if (!p->exe().empty()) {
    Attr(a, "process.executable.name", text::BaseName(p->exe()));
    Attr(a, "process.executable.path", p->exe());
  }
  const std::vector<std::string> args(p->argv().begin(), p->argv().end());
  if (!args.empty()) {
    Attr(a, "process.command_line", text::CommandLine(args, ""));
    AttrList(a, "process.command_args", args);
  }
  if (!p->cwd().empty()) Attr(a, "process.working_directory", p->cwd());
  for (const char* v : kJobVariables) {
    auto it = p->env().find(v);
    if (it != p->env().end()) Attr(a, std::string("process.environment_variable.") + v, it->second);
  }
}

void Scope(common::InstrumentationScope* s) {
  s->set_name(kScope);
  s->set_version(LDSCOPE_CORE_VERSION);
}

using SpanList = google::protobuf::RepeatedPtrField<trace::Span>;

// Monotonic to wall-clock time: the header's pair of clocks, or else the earliest
// image start taken as the moment recording started.
uint64_t AnchorMono(const v1::Timeline& t, const OtlpSource& src) {
  uint64_t anchor_mono = src.start_mono_ns;
  if (anchor_mono == 0) {
    anchor_mono = UINT64_MAX;
    for (const auto& p : t.processes())
      if (p.start_mono_ns() != 0) anchor_mono = std::min(anchor_mono, p.start_mono_ns());
    if (anchor_mono == UINT64_MAX) anchor_mono = 0;
  }
  return anchor_mono;
}

void SetSeverity(v1::Severity severity, logs::LogRecord* r) {
  switch (severity) {
    case v1::ERROR:
      r->set_severity_number(logs::SEVERITY_NUMBER_ERROR);
      r->set_severity_text("ERROR");
      break;
    case v1::WARNING:
      r->set_severity_number(logs::SEVERITY_NUMBER_WARN);
      r->set_severity_text("WARN");
      break;
    default:
      r->set_severity_number(logs::SEVERITY_NUMBER_INFO);
      r->set_severity_text("INFO");
  }
}

// A finding's body and attributes: kind, message, objects, missing symbols, details,
// fixes.
void FindingToRecord(const v1::Finding& f, logs::LogRecord* r) {
  SetSeverity(f.severity(), r);
  r->mutable_body()->set_string_value(f.headline().empty() ? f.message() : f.headline());
  auto* a = r->mutable_attributes();
  Attr(a, "ldscope.finding.kind", FindingKindName(f.kind()));
  Attr(a, "ldscope.finding.message", f.message());
  std::vector<std::string> objects, missing, details, fixes;
  for (const auto& o : f.objects()) objects.push_back(o.path());
  for (const auto& m : f.missing())
    missing.push_back(m.version().empty() ? m.name() : m.name() + "@" + m.version());
  for (const auto& d : f.details()) details.push_back(d.label() + ": " + d.text());
  for (const auto& x : f.fixes()) fixes.push_back(EnumWord(x.action()) + ": " + x.text());
  if (!objects.empty()) AttrList(a, "ldscope.finding.objects", objects);
  if (!missing.empty()) AttrList(a, "ldscope.finding.missing_symbols", missing);
  if (!details.empty()) AttrList(a, "ldscope.finding.details", details);
  if (!fixes.empty()) AttrList(a, "ldscope.finding.fixes", fixes);
}

// One export: every image's spans are built (a finding may rest on an image sent
// earlier), only the selected ones go into the request; then the findings as log
// records on the spans that hold their evidence.
class OtlpExport {
 public:
  OtlpExport(const v1::Timeline& t, const OtlpSource& src, const OtlpSelect& select)
      : t_(t), src_(src), select_(select), anchor_mono_(AnchorMono(t, src)),
        seed_(Hash({src.host, std::to_string(src.start_unix_ns)})),
        trace_id_(Bytes8(seed_) + Bytes8(Hash({"trace", std::to_string(seed_)}))) {
    for (const auto& p : t.processes()) by_stream_[p.stream()] = &p;
  }

  void AddSpans(OtlpPayload* out) {
    for (const auto& p : t_.processes()) {
      auto unix_ns = [&src = src_, anchor_mono = anchor_mono_, start = p.start_mono_ns()](uint64_t offset) {
        return src.start_unix_ns + (start + offset) - anchor_mono;
      };
      auto b = std::make_unique<ProcessSpans>(p, trace_id_, seed_, unix_ns);
      std::string parent_span;
      if (const auto* q = ParentImage(p))
        parent_span = ProcessSpans(*q, trace_id_, seed_, unix_ns).ProcessSpanId();
      SpanList* spans;
      if (!select_.process || select_.process(p)) {
        auto* rs = out->traces.add_resource_spans();
        ResourceOf(&p, src_.host, rs->mutable_resource());
        auto* ss = rs->add_scope_spans();
        Scope(ss->mutable_scope());
        spans = ss->mutable_spans();
        b->Build(parent_span, spans);
        out->spans += static_cast<uint64_t>(spans->size());
      } else {
        unsent_.push_back(std::make_unique<SpanList>());
        spans = unsent_.back().get();
        b->Build(parent_span, spans);
      }
      spans_of_stream_[p.stream()] = spans;
      builders_[p.stream()] = std::move(b);
    }
  }

  void AddLogs(const v1::Report& findings, OtlpPayload* out) {
    std::map<uint32_t, logs::ScopeLogs*> scope_logs;
    for (const auto& f : findings.findings()) {
      if (select_.finding && !select_.finding(f)) continue;
      logs::ScopeLogs*& sl = scope_logs[f.stream()];
      if (sl == nullptr) {
        auto* rl = out->logs.add_resource_logs();
        ResourceOf(by_stream_.count(f.stream()) ? by_stream_[f.stream()] : nullptr, src_.host,
                   rl->mutable_resource());
        sl = rl->add_scope_logs();
        Scope(sl->mutable_scope());
      }
      auto* r = sl->add_log_records();
      uint64_t when = src_.start_unix_ns;
      auto b = builders_.find(f.stream());
      if (b != builders_.end()) {
        r->set_span_id(b->second->SpanOfFinding(f, *spans_of_stream_[f.stream()], &when));
        r->set_trace_id(trace_id_);
        r->set_flags(1);  // sampled, as the spans are
      }
      r->set_time_unix_nano(when);
      r->set_observed_time_unix_nano(when);
      FindingToRecord(f, r);
      ++out->log_records;
    }
  }

 private:
  // Parentage: a forked image's parent is its parent's image; an exec'd image's is the
  // previous image of its pid, else the latest image of its parent pid started before it.
  const v1::ProcessTimeline* ParentImage(const v1::ProcessTimeline& p) {
    if (p.parent_stream() != 0 && by_stream_.count(p.parent_stream())) return by_stream_[p.parent_stream()];
    const v1::ProcessTimeline* best = nullptr;
    for (const auto& q : t_.processes())
      if (q.pid() == p.pid() && q.start_mono_ns() < p.start_mono_ns() &&
          (best == nullptr || q.start_mono_ns() > best->start_mono_ns()))
        best = &q;
    if (best != nullptr || p.ppid() <= 0) return best;
    for (const auto& q : t_.processes())
      if (static_cast<int32_t>(q.pid()) == p.ppid() && q.start_mono_ns() <= p.start_mono_ns() &&
          (best == nullptr || q.start_mono_ns() > best->start_mono_ns()))
        best = &q;
    return best;
  }

  const v1::Timeline& t_;
  const OtlpSource& src_;
  const OtlpSelect& select_;
  const uint64_t anchor_mono_;
  const uint64_t seed_;
  const std::string trace_id_;
  std::map<uint32_t, const v1::ProcessTimeline*> by_stream_;
  std::map<uint32_t, std::unique_ptr<ProcessSpans>> builders_;
  std::map<uint32_t, const SpanList*> spans_of_stream_;
  std::vector<std::unique_ptr<SpanList>> unsent_;
};

// The value of a base64 digit, or -1 (padding and anything else).
int Base64Digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// The base64 text as lowercase hex of the bytes it encodes.
std::string Base64ToHex(std::string_view b64) {
  std::string hex;
  uint32_t bits = 0;
  int nbits = 0;
  for (char c : b64) {
    const int d = Base64Digit(c);
    if (d < 0) break;
    bits = (bits << 6) | static_cast<uint32_t>(d);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      hex += fmt::format("{:02x}", (bits >> nbits) & 0xff);
    }
  }
  return hex;
}

// Rewrites the values of the id keys from base64 to hex in protobuf's JSON, in one pass.
// A key with its quotes, colon and opening quote cannot occur inside a JSON string (its
// quotes would be escaped there), so every match is a key.
std::string HexIds(const std::string& json) {
  constexpr std::string_view kMarker = "Id\":\"";
  std::string out;
  size_t pos = 0;
  for (size_t at = json.find(kMarker); at != std::string::npos; at = json.find(kMarker, at + 1)) {
    bool id = false;
    for (std::string_view key : {"\"trace", "\"span", "\"parentSpan"})
      id |= at >= key.size() && json.compare(at - key.size(), key.size(), key) == 0;
    if (!id) continue;
    const size_t value = at + kMarker.size();
    const size_t close = json.find('"', value);
    if (close == std::string::npos) break;
    out.append(json, pos, value - pos);
    out += Base64ToHex(std::string_view(json).substr(value, close - value));
    pos = at = close;
  }
  out.append(json, pos, std::string::npos);
  return out;
}

}  // namespace

std::string OtlpJsonLine(const google::protobuf::Message& request) {
  google::protobuf::util::JsonPrintOptions opt;
  opt.add_whitespace = false;
  opt.always_print_enums_as_ints = true;
  opt.preserve_proto_field_names = false;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(request, &json, opt).ok()) return "";
  return HexIds(json) + "\n";
}

std::string OtlpProcessKey(const v1::ProcessTimeline& p) {
  return fmt::format("{}/{}", p.pid(), p.start_mono_ns());
}

OtlpPayload Otlp(const v1::Timeline& model, const v1::Report& findings, const OtlpSource& src,
                 const OtlpSelect& select) {
  OtlpPayload out;
  const v1::Timeline t = ShownTimeline(model);
  OtlpExport exp(t, src, select);
  exp.AddSpans(&out);
  exp.AddLogs(findings, &out);
  return out;
}

}  // namespace ldscope::render
