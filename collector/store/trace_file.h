// Trace files: a TraceHeader then size-delimited Events (protobuf's delimited format,
// readable with ParseDelimitedFromCodedStream). Reading never gives up on the whole
// file: a truncated or corrupt tail is reported with its byte offset and everything
// before it is kept.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"
#include "store/output_file.h"
#include "text/result.h"

namespace ldscope::store {

struct ReadProblem {
  std::string file;
  uint64_t offset = 0;
  std::string message;
};

// One trace file's content: what could be read, and where reading stopped and why. A
// damaged file is not a failure of the reader (everything before the damage is kept),
// so this is not a Result. The events' byte strings (paths, argv, environment, names)
// are escaped text (text/escape.h), the problem's file name too; path is as given.
struct TraceFile {
  std::string path;
  v1::TraceHeader header;
  std::vector<v1::Event> events;
  // The collector's ObjectFacts records (events.proto), taken out of events, as the
  // message bytes the file holds (not decoded here: elf::TraceFacts decodes what a lookup
  // needs; their byte strings are the file's, elf::FromFacts escapes them).
  std::vector<std::string> facts;
  std::optional<ReadProblem> problem;  // where reading stopped; none when it read to the end
  bool ok() const { return !problem.has_value(); }
};

TraceFile ReadTraceFile(const std::string& path);
// False when nothing of the file could be read (it could not be opened, or it is not
// an ldscope trace at all: empty, another kind of file, no valid header).
bool Readable(const TraceFile& f);
// Parses an in-memory image of a trace file (for tests and fuzzing).
TraceFile ParseTrace(const std::string& name, const uint8_t* data, size_t size);

struct TraceSet {
  std::vector<TraceFile> files;
  std::vector<std::string> errors;  // paths that could not be opened at all
};
// The *.ldscope file names in a directory, sorted; an error when it cannot be read or
// holds none.
Result<std::vector<std::string>> TraceNamesIn(const std::string& dir);
// Loads files and LDSCOPE_DIR directories (every *.ldscope file inside). Events from
// per-process files (stream 0) get a stream number of their own per file.
TraceSet LoadTraces(const std::vector<std::string>& paths);
// True when at least one file of the set could be read ("no trace could be read" is
// exit status 2 for show/report/export/diff).
bool AnyReadable(const TraceSet& set);
// The trace file each stream of a loaded trace set came from.
std::map<uint32_t, std::string> TraceFilesByStream(const TraceSet& traces);
// The same for a trace held in memory (`run` analyses what it recorded without reading
// its output back).
TraceSet LoadTraceImage(const std::string& name, const std::string& bytes);

// Appends records to a trace file as they arrive. Every write is checked: at the first
// failure writing stops (a regular file is cut back to its last whole record, so it
// stays a readable prefix) and Close() names the file, the errno and what was lost.
class TraceWriter {
 public:
  TraceWriter() = default;
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Opens path ("-": standard output) as store::OpenOutput does, without truncating it.
  Status Prepare(const std::string& path);
  // Writing starts: empties the file and writes the header.
  Status Begin(const v1::TraceHeader& header);
  // The run never started: closes, removing the file if Prepare created it.
  void Discard();
  // Prepare and Begin.
  Status Open(const std::string& path, const v1::TraceHeader& header);
  // Also keep every record in memory (copy()), so that the trace can be analysed
  // without reading the output back (it may be a pipe, a device, or incomplete).
  void KeepCopy() { keep_copy_ = true; }
  const std::string& copy() const { return copy_; }

  // Appends one serialized Event, adding `stream` as field 7 (protobuf merges
  // concatenated fields, so the bytes need no re-encoding). An error once writing
  // failed: the record is counted, and Close() reports how many were lost.
  Status AppendEvent(const uint8_t* data, size_t size, uint32_t stream);
  // Writes what is buffered; an error once writing failed (Close() reports it too).
  Status Flush();
  Status Close();  // the error names the file, the errno and what was lost
  bool failed() const { return error_ != 0; }

 private:
  void Record(const uint8_t* head, size_t hn, const uint8_t* body, size_t bn,
              const uint8_t* tail, size_t tn);
  void Fail(int err, size_t done);
  Status WriteError() const;  // "cannot write PATH: errno text" for error_

  Output out_;
  bool begun_ = false;
  std::string buf_;                 // whole records not yet written
  std::vector<size_t> record_ends_; // end offsets of the records in buf_
  bool keep_copy_ = false;
  std::string copy_;
  int error_ = 0;                   // the first write error
  uint64_t written_ = 0;            // bytes in the file
  uint64_t records_ = 0, records_written_ = 0;
};
}  // namespace ldscope::store
