// `ldscope export --chrome TRACE -o out.json`: the timeline as a Chrome trace.
// `ldscope export --otlp FILE|URL TRACE`: the timeline and findings as OpenTelemetry
// (OTLP): POSTed to an OTLP/HTTP endpoint, or written to a file.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <regex>

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

// --otlp FILE: the traces request, then the logs request, each preceded by its size as
// a varint (protobuf's delimited format, as in ldscope's trace files).
std::string DelimitedPair(const render::OtlpPayload& p) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    const std::string t = p.traces.SerializeAsString(), l = p.logs.SerializeAsString();
    coded.WriteVarint32(static_cast<uint32_t>(t.size()));
    coded.WriteRaw(t.data(), static_cast<int>(t.size()));
    coded.WriteVarint32(static_cast<uint32_t>(l.size()));
    coded.WriteRaw(l.data(), static_cast<int>(l.size()));
  }
  return out;
}

}  // namespace

int Export(const ExportOptions& opt) {
  if (opt.chrome == !opt.otlp.empty()) {
    Complain("export: say which format: --chrome -o FILE, or --otlp FILE|http://HOST:PORT");
    return kUsage;
  }
  if (opt.chrome && opt.output.empty()) {
    Complain("export --chrome: -o FILE is required");
    return kUsage;
  }
  if (!opt.otlp.empty() && !opt.output.empty()) {
    Complain("export --otlp: the destination is --otlp's argument; -o is for --chrome");
    return kUsage;
  }
  const bool to_url = net::LooksLikeUrl(opt.otlp);
  net::Url url;
  if (to_url) {
    Result<net::Url> parsed = net::ParseUrl(opt.otlp);
    if (!parsed.ok()) {
      Complain("export --otlp: " + parsed.error());
      return kUsage;
    }
    url = std::move(parsed).value();
  }
  // HOST:PORT without a scheme would otherwise become a file of that name.
  if (!opt.otlp.empty() && !to_url &&
      std::regex_match(opt.otlp, std::regex("[A-Za-z0-9.-]+:[0-9]+(/.*)?"))) {
    Complain(fmt::format("export --otlp: '{}' looks like HOST:PORT: write http://{} for an "
                         "endpoint, or ./{} for a file", opt.otlp, opt.otlp, opt.otlp));
    return kUsage;
  }
  const std::string file = opt.chrome ? opt.output : (to_url ? "" : opt.otlp);
  if (!file.empty())
    if (Status s = store::CheckOutputs({{opt.chrome ? "-o" : "--otlp", file}}, opt.traces); !s.ok()) {
      Complain(s.error());
      return kWriteFailed;
    }
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
  const render::OtlpPayload payload = render::Otlp(timeline, report, OtlpSourceOf(traces));
  if (!to_url) {
    if (Status s = store::WriteTextFile(opt.otlp, DelimitedPair(payload)); !s.ok()) {
      Complain(s.error());
      return kWriteFailed;
    }
    return ok;
  }
  // Both requests are tried; either failing makes the export incomplete (status 4).
  int status = ok;
  const std::pair<const char*, std::string> requests[] = {
      {kOtlpTracesPath, payload.traces.SerializeAsString()},
      {kOtlpLogsPath, payload.logs.SerializeAsString()}};
  for (const auto& [suffix, body] : requests) {
    if (Status s = OtlpPost(url, suffix, body, /*timeout_ms=*/10000); !s.ok()) {
      Complain("export --otlp: " + s.error());
      status = kWriteFailed;
    }
  }
  return status;
}

}  // namespace ldscope::cli
