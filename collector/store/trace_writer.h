// Writing a trace file as its records arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"
#include "store/output_file.h"
#include "text/result.h"

namespace ldscope::store {

// Appends records to a trace file as they arrive. Every write is checked: at the first
// failure writing stops (a regular file is cut back to its last whole record, so it
// stays a readable prefix) and Close() names the file, the errno and what was lost.
class TraceWriter {
 public:
  TraceWriter() = default;
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Opens path ("-": standard output) as store::OpenOutput does: a regular file keeps
  // what it had until Begin.
  Status Prepare(const std::string& path);
  // Writing starts: the header, and the new file renamed over the name.
  Status Begin(const v1::TraceHeader& header);
  // The run never started: closes; the file keeps what it had.
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
  // The file written is the one descriptor 1 is ("-", /dev/stdout).
  bool writes_stdout() const;

 private:
  void Record(const uint8_t* head, size_t hn, const uint8_t* body, size_t bn, const uint8_t* tail, size_t tn);
  void Fail(int err, size_t done);
  Status WriteError() const;  // "cannot write PATH: errno text" for error_

  Output out_;
  bool begun_ = false;
  std::string buf_;                  // whole records not yet written
  std::vector<size_t> record_ends_;  // end offsets of the records in buf_
  bool keep_copy_ = false;
  std::string copy_;
  int error_ = 0;         // the first write error
  uint64_t written_ = 0;  // bytes in the file
  uint64_t records_ = 0, records_written_ = 0;
};

}  // namespace ldscope::store
