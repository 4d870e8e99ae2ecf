// Trace files: a TraceHeader then size-delimited Events (protobuf's delimited format,
// readable with ParseDelimitedFromCodedStream). Reading never gives up on the whole
// file: a truncated or corrupt tail is reported with its byte offset and everything
// before it is kept.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"

namespace ldscope::store {

struct ReadProblem {
  std::string file;
  uint64_t offset = 0;
  std::string message;
};

// One trace file's content. The events' byte strings (paths, argv, environment, names)
// are escaped text (text/escape.h), the problem's file name too; path is as given.
struct TraceFile {
  std::string path;
  v1::TraceHeader header;
  std::vector<v1::Event> events;
  bool ok = true;
  ReadProblem problem;  // set when !ok
};

TraceFile ReadTraceFile(const std::string& path);
// Reads a protobuf varint at data[*pos] and advances *pos; false if it runs past size or
// over 10 bytes.
bool ReadVarint(const uint8_t* data, size_t size, size_t* pos, uint64_t* out);
// Parses an in-memory image of a trace file (for tests and fuzzing).
TraceFile ParseTrace(const std::string& name, const uint8_t* data, size_t size);

// Loads files and LDSCOPE_DIR directories (every *.ldscope file inside). Events from
// per-process files (stream 0) get a stream number of their own per file.
struct TraceSet {
  std::vector<TraceFile> files;
  std::vector<std::string> errors;  // paths that could not be opened at all
};
TraceSet LoadTraces(const std::vector<std::string>& paths);

// Appends records to a trace file as they arrive.
class TraceWriter {
 public:
  TraceWriter() = default;
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Creates (truncates) path and writes the header. Returns an error message or "".
  std::string Open(const std::string& path, const v1::TraceHeader& header);
  // Appends one serialized Event, adding `stream` as field 7 (protobuf merges
  // concatenated fields, so the bytes need no re-encoding).
  bool AppendEvent(const uint8_t* data, size_t size, uint32_t stream);
  bool Flush();
  std::string Close();  // "" or an error
  uint64_t bytes_written() const { return bytes_; }

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  uint64_t bytes_ = 0;
  bool failed_ = false;
};

}  // namespace ldscope::store
