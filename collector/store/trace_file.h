// Trace files: a TraceHeader then size-delimited Events (protobuf's delimited format,
// readable with ParseDelimitedFromCodedStream). Reading never gives up on the whole
// file: a truncated or corrupt tail is reported with its byte offset and everything
// before it is kept.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <optional>
#include <string>
#include <vector>

#include "ldscope_proto/events.pb.h"
#include "store/record_index.h"
#include "store/trace_bytes.h"
#include "store/trace_writer.h"
#include "text/result.h"

namespace ldscope::store {

struct ReadProblem {
  std::string file;
  uint64_t offset = 0;
  std::string message;
};

// The event records of one stream of a file (as the file numbers it: the audit
// library's wire economies are undone per file stream), sorted by seq (stable: equal
// seqs in file order), and where its ProcessStart records are among them.
struct EventStream {
  uint32_t file_stream = 0;
  uint32_t stream = 0;  // as Event.stream after LoadTraces (file_stream until then)
  RecordIndex records;
  std::vector<uint32_t> starts;  // indexes into records
};

// One trace file's content: what could be read, and where reading stopped and why. A
// damaged file is not a failure of the reader (everything before the damage is kept),
// so this is not a Result. The events' and the header's byte strings (paths, argv,
// environment, names: events.proto's `bytes` fields) are the bytes the trace holds;
// the problem's file name is escaped text (text/escape.h); path is as given.
//
// The events are either decoded (`events`, in file order: ParseTrace, tests), or, for a
// file read by ReadTraceFileIndexed/LoadTracesIndexed, indexed (`streams` into `bytes`) and decoded by
// whoever reads them (EventDecoder), one at a time: a trace of millions of events is
// never held decoded as a whole.
struct TraceFile {
  std::string path;
  v1::TraceHeader header;
  std::vector<v1::Event> events;
  std::shared_ptr<const TraceBytes> bytes;
  std::vector<EventStream> streams;  // by file_stream
  // The CollectorNotes records (indexed files): where each lies, and its stream (as
  // EventStream.stream), in file order.
  std::vector<std::pair<uint64_t, uint32_t>> collector;
  // The collector's ObjectFacts records (events.proto), taken out of events, as the
  // message bytes the file holds (not decoded here: elf::TraceFacts decodes what a lookup
  // needs; their byte strings are the file's, elf::FromFacts escapes them).
  std::vector<std::string> facts;
  std::optional<ReadProblem> problem;  // where reading stopped; none when it read to the end
  bool ok() const { return !problem.has_value(); }
};

// Reads a file, its events decoded (`events`).
TraceFile ReadTraceFile(const std::string& path);
// The same, its events indexed, not decoded (see TraceFile): for a big trace.
TraceFile ReadTraceFileIndexed(const std::string& path);
// False when nothing of the file could be read (it could not be opened, or it is not
// an ldscope trace at all: empty, another kind of file, no valid header).
bool Readable(const TraceFile& f);
// Parses an in-memory image of a trace file (for tests and fuzzing): decoded events, or
// (indexed) events indexed into a copy of the bytes.
TraceFile ParseTrace(const std::string& name, const uint8_t* data, size_t size, bool indexed = false);
// Parses the bytes of a file (a mapping, say): events indexed into them, or decoded. A
// mapped file cut short while it was read says so in its problem.
TraceFile ParseTraceBytes(const std::string& name, std::shared_ptr<const TraceBytes> bytes, bool indexed);
// The problem of a file whose mapping was found cut short (see TraceBytes::CutAt) after it
// was indexed, while its events were decoded; none otherwise.
std::optional<ReadProblem> CutWhileDecoding(const TraceFile& f);
// The number of events of a file, decoded or indexed.
size_t EventCount(const TraceFile& f);

// A protobuf arena whose first block is its own and survives Reset(): reset often, it
// frees each time only what was made since (the strings' buffers, blocks past the
// first), never thousands of blocks at once, which glibc's malloc is slow to take back.
class ReusedArena {
 public:
  explicit ReusedArena(size_t first_block);
  ReusedArena(const ReusedArena&) = delete;
  ReusedArena& operator=(const ReusedArena&) = delete;
  google::protobuf::Arena* get() { return &arena_; }

 private:
  std::unique_ptr<char[]> block_;
  google::protobuf::Arena arena_;
};

// An Event to decode one record after another into: on an arena, emptied every 64
// records, so that decoding allocates and frees nothing of its own per record.
class ScratchEvent {
 public:
  ScratchEvent();
  ScratchEvent(const ScratchEvent&) = delete;
  ScratchEvent& operator=(const ScratchEvent&) = delete;
  // An empty Event; the one given before is gone.
  v1::Event* Next();

 private:
  ReusedArena arena_;
  v1::Event* event_ = nullptr;
  uint32_t uses_ = 0;
};

struct Resolution;

// Decodes one indexed stream's records, in its order (the wire economies are undone
// from the stream's first record on: Decode the records in order, from the first).
class EventDecoder {
 public:
  EventDecoder(const TraceFile& file, const EventStream& stream);
  ~EventDecoder();
  EventDecoder(EventDecoder&&) noexcept;
  EventDecoder(const EventDecoder&) = delete;
  EventDecoder& operator=(const EventDecoder&) = delete;
  // The record's event, resolved as ParseTrace gives it. The records were
  // checked when the file was indexed. What resolving interned strings adds is bounded
  // by the stream's bytes (resolve.cc, kResolvedPerByte): past that, a resolved
  // string is cut and its event marked truncated.
  void Decode(uint64_t at, v1::Event* out);

 private:
  const TraceFile& file_;
  const EventStream& stream_;
  std::unique_ptr<Resolution> resolution_;  // the stream's interned strings (resolve.h)
  uint64_t since_trim_ = 0;
};
// The event of one record alone, without what earlier records of its stream would add:
// exact for a stream's first record and for every ProcessStart.
v1::Event DecodeAlone(const TraceFile& file, const EventStream& stream, uint64_t at);
// The sequence number of an indexed file's event record at `at` (a record of
// EventStream.records), read from the record as the decoder reads it (the last seq
// field wins), without decoding the rest.
uint64_t SeqAt(const TraceFile& file, uint64_t at);

struct TraceSet {
  std::vector<TraceFile> files;
  std::vector<std::string> errors;  // paths that could not be opened at all
};
// The *.ldscope file names in a directory, sorted; an error when it cannot be read or
// holds none.
Result<std::vector<std::string>> TraceNamesIn(const std::string& dir);
// The most bytes of trace one command reads (all its files together): past it the
// traces are refused before any is read (docs/ARCHITECTURE.md, "Bounds on reading a
// trace"). Within it, a reader's memory is bounded by the trace's size.
inline constexpr uint64_t kMaxTraceBytes = 4ull << 30;
// "too large: ..." when the files and directories (their *.ldscope files) of paths hold
// more than kMaxTraceBytes together; nothing when they hold less, or when one cannot be
// looked at (reading it says why).
std::optional<std::string> TooLarge(const std::vector<std::string>& paths);
// Loads files and LDSCOPE_DIR directories (every *.ldscope file inside). Events from
// per-process files (stream 0) get a stream number of their own per file.
TraceSet LoadTraces(const std::vector<std::string>& paths);
// The same with the files' events indexed, not decoded (what show, report and the other
// commands read: model::BuildTimeline takes either). `read`, when given, is called
// after each file with the files read so far and the number of files (directories
// listed first).
using FilesRead = std::function<void(size_t done, size_t total)>;
TraceSet LoadTracesIndexed(const std::vector<std::string>& paths, const FilesRead& read = {});
// Frees the events (decoded or indexed) and the bytes of every file of a set; the
// headers, problems and facts stay.
void DropEvents(TraceSet* set);
// True when at least one file of the set could be read ("no trace could be read" is
// exit status 2 for show/report/export/diff).
bool AnyReadable(const TraceSet& set);
// The trace file each stream of a loaded trace set came from.
std::map<uint32_t, std::string> TraceFilesByStream(const TraceSet& traces);
// The same for a trace held in memory (`run` analyses what it recorded without reading
// its output back).
TraceSet LoadTraceImage(const std::string& name, const std::string& bytes);

}  // namespace ldscope::store
