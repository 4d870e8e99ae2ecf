// OpenTelemetry (OTLP) of a timeline and its findings: the bodies of OTLP/HTTP's
// /v1/traces and /v1/logs requests (proto/opentelemetry/..., OpenTelemetry's own schema).
//
// One resource per process image (host.name, process.pid, process.command_line, ...,
// and the rank and CI job variables it had); in it a span for the image, parented on
// the image that forked or exec'd it; child spans for each dlopen and each Python
// import, carrying the loads they caused as span events (start-up loads are events of
// the process span); findings as log records tied to the span of the load they rest on.
// Ids are derived from the trace (host, start time, pid, image start, sequence number),
// so the same trace always gives the same ids, and a stream sent in pieces while
// recording (`collect --otlp`) links up as the export of the whole file does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ldscope_proto/opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include "ldscope_proto/opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "ldscope_proto/report.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::render {

// What the trace files' headers say about where and when the trace was taken.
struct OtlpSource {
  std::string host;             // escaped text (collector/text/escape.h)
  uint64_t start_unix_ns = 0;   // wall-clock time recording started
  uint64_t start_mono_ns = 0;   // CLOCK_MONOTONIC at that moment (0: not recorded)
};

struct OtlpPayload {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest traces;
  opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest logs;
  uint64_t spans = 0;
  uint64_t log_records = 0;
};

// Which processes and findings to include (all when a function is empty). A finding is
// linked to its span whether or not its process is included.
struct OtlpSelect {
  std::function<bool(const v1::ProcessTimeline&)> process;
  std::function<bool(const v1::Finding&)> finding;
};

OtlpPayload Otlp(const v1::Timeline& t, const v1::Report& findings, const OtlpSource& src,
                 const OtlpSelect& select = {});

// A process image's identity that does not depend on stream numbering.
std::string OtlpProcessKey(const v1::ProcessTimeline& p);

// One line of an OTLP/JSON Lines file (the specification's file exporter: a request per
// line, one signal per file) for an ExportTraceServiceRequest or ExportLogsServiceRequest:
// the OTLP JSON encoding, i.e. protobuf's JSON mapping (lowerCamelCase keys, 64-bit
// integers as decimal strings, default values left out) with enums as integers and the
// trace and span ids as lowercase hex instead of base64. Ends with '\n'; empty when
// protobuf cannot print the message (a string that is not UTF-8).
std::string OtlpJsonLine(const google::protobuf::Message& request);

}  // namespace ldscope::render
