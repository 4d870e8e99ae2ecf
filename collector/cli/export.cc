// `ldscope export --chrome TRACE -o out.json`: the timeline as a Chrome trace.
// `ldscope export --otlp DIR|URL TRACE` (or --otlp-traces FILE --otlp-logs FILE): the
// timeline and findings as OpenTelemetry (OTLP): POSTed to an OTLP/HTTP endpoint, or
// written as OTLP/JSON Lines files (the specification's file exporter format).
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "cli/otlp.h"
#include "model/timeline.h"
#include "net/http.h"
#include "render/otlp.h"
#include "render/render.h"
#include "store/output_file.h"
#include "store/trace_file.h"

namespace ldscope::cli {
namespace {

// Where the OTLP/JSON Lines files go: --otlp DIR's two, or --otlp-traces/--otlp-logs.
struct OtlpFiles {
  std::string dir;           // --otlp DIR, created when missing
  std::string traces, logs;  // "" for a signal not written
  std::string traces_option, logs_option;
};

// File names an old `--otlp FILE` (or a mistaken one) would have: refused, not made a
// directory of.
bool LooksLikeAFileName(const std::string& path) {
  static const std::regex file_like(".*\\.(otlp|pb|bin|proto|protobuf|json|jsonl|ndjson|txt)$", std::regex::icase);
  return std::regex_match(path, file_like);
}

// --otlp DIR: a directory that exists, or a name for a new one; a file is refused.
Status CheckOtlpDir(const std::string& dir) {
  const std::string hint = fmt::format(
      "--otlp DIR writes DIR/traces.jsonl and DIR/logs.jsonl (OTLP/JSON Lines); to name the "
      "files yourself, use --otlp-traces FILE --otlp-logs FILE");
  struct stat st {};
  if (dir == "-") return Error{"export --otlp: standard output takes one signal: --otlp-traces - or --otlp-logs -"};
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return Error{fmt::format("export --otlp: '{}' is not a directory: {}", dir, hint)};
  }
  if (LooksLikeAFileName(dir))
    return Error{
        fmt::format("export --otlp: '{}' looks like a file name, and --otlp takes a "
                    "directory: {}",
                    dir, hint)};
  return Status::Ok();
}

// Creates --otlp DIR when it does not exist (0700, as ldscope's files are 0600).
Status MakeOtlpDir(const std::string& dir) {
  if (dir.empty() || mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) return Status::Ok();
  return Error{fmt::format("cannot create the directory {}: {}", dir, std::strerror(errno))};
}

// Writes the requests that have a file: a line each (no line for an empty request).
int WriteOtlpFiles(const OtlpFiles& files, const render::OtlpPayload& payload, int ok) {
  if (Status s = MakeOtlpDir(files.dir); !s.ok()) {
    Complain("export --otlp: " + s.error());
    return kWriteFailed;
  }
  int status = ok;
  const struct {
    const std::string& path;
    const google::protobuf::Message& request;
    uint64_t items;
  } outputs[] = {{files.traces, payload.traces, payload.spans}, {files.logs, payload.logs, payload.log_records}};
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    const std::string line = o.items == 0 ? "" : render::OtlpJsonLine(o.request);
    if (o.items > 0 && line.empty()) {
      Complain(fmt::format("export --otlp: {}: protobuf cannot print the request as JSON", o.path));
      status = kWriteFailed;
      continue;
    }
    if (Status s = store::WriteTextFile(o.path, line); !s.ok()) {
      Complain(s.error());
      status = kWriteFailed;
    }
  }
  return status;
}

// What the options ask for, checked before any trace is read: the usage errors (2) and
// outputs that would overwrite an input or each other (4).
struct ExportTarget {
  bool to_url = false;  // --otlp URL or --otlp-http
  OtlpConfig config;
  OtlpFiles files;
};

int CheckExportTarget(const ExportOptions& opt, ExportTarget* t) {
  const bool signal_files = !opt.otlp_traces.empty() || !opt.otlp_logs.empty();
  const bool otlp = !opt.otlp.empty() || signal_files || opt.otlp_http;
  if (opt.chrome == otlp) {
    Complain(
        "export: say which format: --chrome -o FILE, or --otlp DIR|http://HOST:PORT "
        "(or --otlp-traces FILE --otlp-logs FILE)");
    return kUsage;
  }
  if (opt.chrome && opt.output.empty()) {
    Complain("export --chrome: -o FILE is required");
    return kUsage;
  }
  if (otlp && !opt.output.empty()) {
    Complain("export --otlp: the destination is --otlp's argument; -o is for --chrome");
    return kUsage;
  }
  if ((!opt.otlp.empty()) + signal_files + opt.otlp_http > 1) {
    Complain(
        "export: one OTLP destination: --otlp DIR|URL, --otlp-http, or --otlp-traces FILE "
        "and --otlp-logs FILE");
    return kUsage;
  }
  t->to_url = net::LooksLikeUrl(opt.otlp) || opt.otlp_http;
  if (t->to_url) {
    Result<OtlpConfig> config = OtlpConfigFromEnv(opt.otlp);
    if (!config.ok()) {
      Complain("export --otlp: " + config.error());
      return kUsage;
    }
    t->config = std::move(config).value();
  }
  // HOST:PORT without a scheme would otherwise become a directory of that name.
  if (!opt.otlp.empty() && !t->to_url && std::regex_match(opt.otlp, std::regex("[A-Za-z0-9.-]+:[0-9]+(/.*)?"))) {
    Complain(
        fmt::format("export --otlp: '{}' looks like HOST:PORT: write http://{} for an "
                    "endpoint, or ./{} for a directory",
                    opt.otlp, opt.otlp, opt.otlp));
    return kUsage;
  }
  if (!opt.otlp.empty() && !t->to_url) {
    if (Status s = CheckOtlpDir(opt.otlp); !s.ok()) {
      Complain(s.error());
      return kUsage;
    }
    const std::string dir = opt.otlp.back() == '/' ? opt.otlp : opt.otlp + "/";
    t->files = {opt.otlp, dir + "traces.jsonl", dir + "logs.jsonl", "--otlp", "--otlp"};
  } else if (signal_files) {
    t->files = {"", opt.otlp_traces, opt.otlp_logs, "--otlp-traces", "--otlp-logs"};
  }
  const std::vector<std::pair<std::string, std::string>> outputs =
      opt.chrome ? std::vector<std::pair<std::string, std::string>>{{"-o", opt.output}}
                 : std::vector<std::pair<std::string, std::string>>{{t->files.traces_option, t->files.traces},
                                                                    {t->files.logs_option, t->files.logs}};
  if (Status s = store::CheckOutputs(outputs, opt.traces); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  return kOk;
}

// Both requests are tried; either failing makes the export incomplete (status 4).
int PostOtlp(const OtlpConfig& config, const render::OtlpPayload& payload, int ok) {
  int status = ok;
  OtlpSender sender(config);
  const std::pair<const char*, std::string> requests[] = {{kOtlpTracesPath, payload.traces.SerializeAsString()},
                                                          {kOtlpLogsPath, payload.logs.SerializeAsString()}};
  auto sleep = [](int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return true;
  };
  for (const auto& [suffix, body] : requests) {
    if (Status s = sender.Send(suffix, body, sleep); !s.ok()) {
      Complain("export --otlp: " + s.error());
      status = kWriteFailed;
    }
  }
  return status;
}

}  // namespace

int Export(const ExportOptions& opt) {
  ExportTarget target;
  if (const int bad = CheckExportTarget(opt, &target); bad != kOk) return bad;
  if (RefuseTooLarge(opt.traces)) return kUsage;
  const store::TraceSet traces = store::LoadTracesIndexed(opt.traces);
  for (const auto& e : traces.errors) Complain(e);
  for (const auto& f : traces.files)
    if (!store::Readable(f)) Complain(fmt::format("{}: {}", f.problem->file, f.problem->message));
  if (!store::AnyReadable(traces)) return NoTrace();
  const v1::Timeline timeline = model::BuildTimeline(traces);
  for (const auto& p : timeline.problems())
    if (!p.file().empty() && p.offset() > 0)  // the unreadable ones were named above
      ComplainDamage(p.file(), p.offset(), p.message(), "exporting");
  const elf::TraceFacts facts = analysis::FactsOf(traces);
  const v1::Report report = analysis::Analyze(timeline, &facts);
  const int ok = timeline.problems_size() > 0 ? kDamagedTrace : kOk;
  if (opt.chrome) {
    if (Status s = store::WriteTextFile(opt.output, render::ChromeTrace(timeline, report));
        !s.ok()) {
      Complain(s.error());
      return kWriteFailed;
    }
    return ok;
  }
  render::OtlpPayload payload = render::Otlp(timeline, report, OtlpSourceOf(traces));
  ApplyOtelResource(OtelResourceFromEnv(), &payload);
  if (!target.to_url) return WriteOtlpFiles(target.files, payload, ok);
  return PostOtlp(target.config, payload, ok);
}

}  // namespace ldscope::cli
