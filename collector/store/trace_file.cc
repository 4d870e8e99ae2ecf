// See trace_file.h.
#include "store/trace_file.h"
#include "store/trace_header.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "store/resolve.h"
#include "text/escape.h"
#include "text/parallel.h"
#include "wire.h"

namespace ldscope::store {
namespace {

// Largest record we accept; anything bigger is corruption, not data.
constexpr uint64_t kMaxRecord = 64u << 20;
// Files larger than this are mapped rather than copied into memory.
constexpr size_t kMapAbove = 256u << 20;

std::string ErrnoText(int err) { return std::strerror(err); }

// An event record holding an ObjectFacts record (field 31): the facts are kept as bytes,
// not parsed (most of a trace's bytes, needed only for a file missing or changed here).
struct FactsScan {
  enum Kind { kOther, kFacts, kCorrupt } kind = kOther;
  size_t offset = 0, size = 0;  // the ObjectFacts message within the record
};

// True when the record is plainly not a facts event: its top level is whole fields of
// the varint, 64-bit, length-delimited and 32-bit wire types, ending exactly at len,
// none of them the facts field. Then ScanFactsEvent's walk could only say kOther (the
// parser checks the rest). Anything else (groups, bad wire types, field 0, tags over 32
// bits, overlong varints) is left to that walk. It is the common case, made cheap: every
// record of a trace goes through here.
bool PlainlyNotFacts(const uint8_t* data, size_t len) {
  constexpr uint64_t kFactsTag = (static_cast<uint64_t>(v1::Event::kObjectFactsFieldNumber) << 3) | 2;
  size_t pos = 0;
  while (pos < len) {
    uint64_t tag = 0, v = 0;
    const size_t tag_at = pos;
    if (!wire::ReadVarint(data, len, &pos, &tag) || pos - tag_at > 5 || tag > UINT32_MAX ||
        (tag >> 3) == 0 || tag == kFactsTag)
      return false;
    switch (tag & 7) {
      case 0:
        if (!wire::ReadVarint(data, len, &pos, &v)) return false;
        break;
      case 1:
        if (len - pos < 8) return false;
        pos += 8;
        break;
      case 2:
        if (!wire::ReadVarint(data, len, &pos, &v) || v > UINT32_MAX || v > len - pos) return false;
        pos += static_cast<size_t>(v);
        break;
      case 5:
        if (len - pos < 4) return false;
        pos += 4;
        break;
      default: return false;
    }
  }
  return true;
}

FactsScan ScanFactsEvent(const uint8_t* data, size_t len) {
  using google::protobuf::internal::WireFormatLite;
  if (PlainlyNotFacts(data, len)) return {};
  constexpr int kPid = v1::Event::kPidFieldNumber, kFactsField = v1::Event::kObjectFactsFieldNumber;
  FactsScan out;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(len));
  uint64_t pid = 0;
  bool facts = false;
  while (uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (field == kFactsField && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t n = 0;
      if (!in.ReadVarint32(&n)) return {FactsScan::kCorrupt};
      // Several occurrences of a message field merge; leave that rare case to the parser.
      if (facts) return {};
      facts = true;
      out.offset = static_cast<size_t>(in.CurrentPosition());
      out.size = n;
      if (!in.Skip(static_cast<int>(n))) return {FactsScan::kCorrupt};
    } else if (field == kPid && type == WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(&pid)) return {FactsScan::kCorrupt};
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return {FactsScan::kCorrupt};
    }
  }
  if (!facts) return {};
  if (!in.ConsumedEntireMessage() || static_cast<size_t>(in.CurrentPosition()) != len ||
      static_cast<uint32_t>(pid) == 0)
    return {FactsScan::kCorrupt};
  // The record must be well formed at its top level, its one string field UTF-8 (what
  // elf::ScanFacts reads; the nested messages are checked when the record is decoded).
  google::protobuf::io::CodedInputStream rec(data + out.offset, static_cast<int>(out.size));
  while (uint32_t tag = rec.ReadTag()) {
    if (tag == WireFormatLite::MakeTag(v1::ObjectFacts::kUnreadableFieldNumber,
                                       WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      std::string s;
      uint32_t n = 0;
      if (!rec.ReadVarint32(&n) || !rec.ReadString(&s, static_cast<int>(n)) ||
          !WireFormatLite::VerifyUtf8String(s.data(), static_cast<int>(s.size()), WireFormatLite::PARSE,
                                            "unreadable"))
        return {FactsScan::kCorrupt};
    } else if (!WireFormatLite::SkipField(&rec, tag)) {
      return {FactsScan::kCorrupt};
    }
  }
  if (!rec.ConsumedEntireMessage() || static_cast<size_t>(rec.CurrentPosition()) != out.size)
    return {FactsScan::kCorrupt};
  out.kind = FactsScan::kFacts;
  return out;
}

}  // namespace

namespace {

// One event record at `at` (its length prefix) of a file that was indexed: its message.
std::pair<const uint8_t*, size_t> RecordAt(const uint8_t* data, size_t size, uint64_t at) {
  size_t pos = static_cast<size_t>(at);
  uint64_t len = 0;
  wire::ReadVarint(data, size, &pos, &len);  // checked when indexed
  return {data + pos, static_cast<size_t>(len)};
}

// The seq of the record at `at`, as the parser gives it: the last Event.seq of the
// varint wire type at the top level (another wire type is an unknown field to the
// parser), skipping other fields (groups too) whole. The records were checked when
// indexed; a record read as zeros (a mapping cut meanwhile) gives 0.
uint64_t SeqOfRecord(const uint8_t* data, size_t size, uint64_t at) {
  using google::protobuf::internal::WireFormatLite;
  constexpr uint32_t kSeqTag =
      WireFormatLite::MakeTag(v1::Event::kSeqFieldNumber, WireFormatLite::WIRETYPE_VARINT);
  const auto [msg, len] = RecordAt(data, size, at);
  google::protobuf::io::CodedInputStream in(msg, static_cast<int>(len));
  uint64_t seq = 0;
  while (const uint32_t tag = in.ReadTag()) {
    if (tag == kSeqTag) {
      if (!in.ReadVarint64(&seq)) break;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  return seq;
}

size_t DecodeRecord(const uint8_t* data, size_t size, uint64_t at, v1::Event* out) {
  const auto [msg, len] = RecordAt(data, size, at);
  out->Clear();
  out->ParseFromArray(msg, static_cast<int>(len));  // checked when indexed
  return len;
}

// What checking one event record found.
struct Checked {
  enum Kind : uint8_t { kCorrupt, kFacts, kCollector, kEvent } kind = kCorrupt;
  bool process_start = false;
  uint32_t stream = 0;
  uint64_t seq = 0;
  size_t facts_offset = 0, facts_size = 0;  // kFacts: the ObjectFacts message in the record
};

// Checks an event record by decoding it into scratch (then forgotten); a facts record
// only by ScanFactsEvent (it is kept as bytes). Runs on any thread.
Checked Check(const uint8_t* rec, size_t len, bool indexed, ScratchEvent& scratch) {
  Checked c;
  const FactsScan facts = ScanFactsEvent(rec, len);
  if (facts.kind == FactsScan::kFacts) {
    c.kind = Checked::kFacts;
    c.facts_offset = facts.offset;
    c.facts_size = facts.size;
    return c;
  }
  v1::Event& e = *scratch.Next();
  if (facts.kind == FactsScan::kCorrupt || !e.ParseFromArray(rec, static_cast<int>(len)) || e.pid() == 0)
    return c;
  c.kind = indexed && (e.has_collector() || e.has_mount_facts() || e.has_owner_facts()) ? Checked::kCollector
                                                                                        : Checked::kEvent;
  c.stream = e.stream();
  c.seq = e.seq();
  c.process_start = e.has_process_start();
  return c;
}

// A record found by its length prefix: where the prefix is, where the message is.
struct RecordSpan {
  uint64_t start = 0, body = 0;
  uint32_t len = 0;
};

// Checks spans[i] into out[i], on up to 8 threads when there are many (decoding is
// most of the reading of a big trace), a piece of kCheckPiece records at a time, each
// piece with a scratch event of its own; the results are the same however many.
constexpr size_t kCheckPiece = 1024;
void CheckAll(const uint8_t* data, const std::vector<RecordSpan>& spans, bool indexed,
              std::vector<Checked>* out) {
  out->assign(spans.size(), Checked{});
  const size_t pieces = (spans.size() + kCheckPiece - 1) / kCheckPiece;
  text::ParallelFor(pieces, 4096 / kCheckPiece, [&](size_t p) {
    ScratchEvent scratch;
    for (size_t i = p * kCheckPiece; i < std::min(spans.size(), (p + 1) * kCheckPiece); ++i)
      (*out)[i] = Check(data + spans[i].body, spans[i].len, indexed, scratch);
  });
}

// A stream as it is indexed, and whether it is in seq order so far (records come in
// file order).
struct Building {
  EventStream s;
  uint64_t last_seq = 0;
  bool sorted = true;
};

// Finds the records from *pos by their length prefixes up to block_end (past it until
// the header is read), the header into t->header and the others into spans; returns
// where finding them stopped, if it did at a damaged prefix or header.
std::optional<ReadProblem> FindRecords(const std::string& shown, const uint8_t* data, size_t size, size_t block_end,
                                       size_t* pos, bool* have_header, TraceFile* t, std::vector<RecordSpan>* spans) {
  while (*pos < size && (*pos < block_end || !*have_header)) {
    const size_t start = *pos;
    uint64_t len = 0;
    auto fail = [&](std::string msg) { return ReadProblem{shown, start, std::move(msg)}; };
    if (!wire::ReadVarint(data, size, pos, &len)) return fail("truncated record length");
    if (len > kMaxRecord) return fail(fmt::format("record length {} is not plausible (corrupt data)", len));
    if (len > size - *pos)
      return fail(fmt::format("truncated record: {} bytes declared, {} present", len, size - *pos));
    if (!*have_header) {
      if (!t->header.ParseFromArray(data + *pos, static_cast<int>(len)) || t->header.format_version() == 0)
        return fail("not an ldscope trace (no valid header)");
      if (t->header.format_version() != 1)
        return fail(fmt::format("unsupported trace format version {}", t->header.format_version()));
      *have_header = true;
    } else {
      spans->push_back({start, *pos, static_cast<uint32_t>(len)});
    }
    *pos += len;
  }
  return std::nullopt;
}

// Takes the checked records in file order, up to the first that is damaged (then
// t->problem): facts and collector records into t, events into their streams.
void TakeRecords(const std::string& shown, const uint8_t* data, const std::vector<RecordSpan>& spans,
                 const std::vector<Checked>& checked, TraceFile* t, std::map<uint32_t, Building>* streams) {
  for (size_t i = 0; i < spans.size(); ++i) {
    const Checked& c = checked[i];
    const uint64_t start = spans[i].start;
    if (c.kind == Checked::kCorrupt) {
      t->problem = ReadProblem{shown, start, "corrupt event record"};
      return;
    }
    if (c.kind == Checked::kFacts) {
      t->facts.emplace_back(reinterpret_cast<const char*>(data + spans[i].body + c.facts_offset), c.facts_size);
    } else if (c.kind == Checked::kCollector) {
      t->collector.emplace_back(start, c.stream);
    } else {
      Building& b = (*streams)[c.stream];
      if (!b.s.records.empty() && c.seq < b.last_seq) b.sorted = false;
      b.last_seq = c.seq;
      b.s.records.push_back(start);
      // Marked here, made indexes once the records are sorted.
      if (c.process_start) b.s.starts.push_back(static_cast<uint32_t>(b.s.records.size() - 1));
    }
  }
}

// Puts a stream's records in seq order, equal seqs in file order (records are in file
// order so far), its starts following them; the seqs read back from the records (a
// mapping's pages trimmed as they are read).
void SortBySeq(const uint8_t* data, size_t size, const TraceBytes* trim, EventStream* s) {
  const size_t n = s->records.size();
  std::vector<uint64_t> seqs(n);
  for (size_t i = 0; i < n; ++i) {
    seqs[i] = SeqOfRecord(data, size, s->records[i]);
    if (trim != nullptr && (i & 0x3ffff) == 0x3ffff) trim->Trim();
  }
  std::vector<char> is_start(n, 0);
  for (uint32_t i : s->starts) is_start[i] = 1;
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return seqs[a] < seqs[b]; });
  RecordIndex records;
  s->starts.clear();
  for (uint32_t i = 0; i < order.size(); ++i) {
    records.push_back(s->records[order[i]]);
    if (is_start[order[i]]) s->starts.push_back(i);
  }
  records.shrink_to_fit();
  s->records = std::move(records);
}

// The records of a file: header, facts, problem, and the event records indexed by
// stream (not decoded). The CollectorNotes, MountFacts and OwnerFacts records go to t.collector when indexed, else
// into their stream like any other. trim: the bytes, when a mapping (see TraceBytes::Trim).
TraceFile Index(const std::string& name, const uint8_t* data, size_t size, bool indexed,
                const TraceBytes* trim = nullptr) {
  TraceFile t;
  t.path = name;
  const std::string shown = text::Escape(name);  // a file name, too
  size_t pos = 0;
  bool have_header = false;
  std::map<uint32_t, Building> streams;
  size_t trimmed = 0;
  // The records are found one after another by their length prefixes, a block of them
  // at a time, then checked (in parallel), then taken in file order up to the first
  // that is damaged: what a record-by-record reading would give.
  std::vector<RecordSpan> spans;
  std::vector<Checked> checked;
  while (pos < size && t.ok()) {
    if (trim != nullptr && pos - trimmed > (32u << 20)) {
      trim->Trim();
      trimmed = pos;
    }
    spans.clear();
    std::optional<ReadProblem> damage =
        FindRecords(shown, data, size, std::min(size, pos + (8u << 20)), &pos, &have_header, &t, &spans);
    CheckAll(data, spans, indexed, &checked);
    TakeRecords(shown, data, spans, checked, &t, &streams);
    if (t.ok() && damage) t.problem = std::move(damage);
  }
  if (t.ok() && !have_header) t.problem = ReadProblem{shown, 0, "empty file: not an ldscope trace"};
  for (auto& entry : streams) {
    EventStream& s = entry.second.s;
    s.file_stream = s.stream = entry.first;
    s.records.shrink_to_fit();
    if (!entry.second.sorted) SortBySeq(data, size, trim, &s);
    t.streams.push_back(std::move(s));
  }
  return t;
}

// Decodes an indexed file's events into t->events, in file order, as they were read
// before indexing existed: resolved per stream in seq order.
void DecodeAll(TraceFile* t, const uint8_t* data, size_t size) {
  std::vector<std::pair<uint64_t, v1::Event>> all;
  for (const auto& s : t->streams) {
    Resolution r;
    for (size_t i = 0; i < s.records.size(); ++i) {
      const uint64_t at = s.records[i];
      all.emplace_back(at, v1::Event());
      const size_t len = DecodeRecord(data, size, at, &all.back().second);
      Apply(r, len, &all.back().second);
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  t->events.reserve(all.size());
  for (auto& [at, e] : all) t->events.push_back(std::move(e));
  t->streams.clear();
}

}  // namespace

TraceFile ParseTrace(const std::string& name, const uint8_t* data, size_t size, bool indexed) {
  TraceFile t = Index(name, data, size, indexed);
  if (indexed)
    t.bytes = std::make_shared<const TraceBytes>(std::string(reinterpret_cast<const char*>(data), size));
  else
    DecodeAll(&t, data, size);
  return t;
}

namespace {
constexpr const char* kCutWhileRead =
    "cut short while it was read (another program truncated or rewrote the file)";
}  // namespace

TraceFile ParseTraceBytes(const std::string& name, std::shared_ptr<const TraceBytes> bytes, bool indexed) {
  TraceFile t = Index(name, bytes->data(), bytes->size(), indexed, bytes.get());
  if (!indexed) DecodeAll(&t, bytes->data(), bytes->size());
  if (const auto cut = bytes->CutAt()) {
    // Bytes past the new end read as zeros, that is as damage: reading stopped at the
    // first record they touch (or at damage before it).
    t.problem = ReadProblem{text::Escape(name), t.problem ? t.problem->offset : *cut, kCutWhileRead};
  }
  if (indexed) t.bytes = std::move(bytes);
  return t;
}

std::optional<ReadProblem> CutWhileDecoding(const TraceFile& f) {
  if (f.bytes == nullptr || (f.problem && f.problem->message == kCutWhileRead)) return std::nullopt;
  const auto cut = f.bytes->CutAt();
  if (!cut) return std::nullopt;
  return ReadProblem{text::Escape(f.path), *cut,
                     std::string(kCutWhileRead) + "; the events of it read from there on are wrong"};
}

size_t EventCount(const TraceFile& f) {
  size_t n = f.events.size() + f.collector.size();
  for (const auto& s : f.streams) n += s.records.size();
  return n;
}

namespace {
google::protobuf::ArenaOptions KeepingFirstBlock(char* block, size_t size) {
  google::protobuf::ArenaOptions o;
  o.start_block_size = o.max_block_size = 256u << 10;
  o.initial_block = block;
  o.initial_block_size = size;
  return o;
}
}  // namespace

ReusedArena::ReusedArena(size_t first_block)
    : block_(new char[first_block]), arena_(KeepingFirstBlock(block_.get(), first_block)) {}

ScratchEvent::ScratchEvent() : arena_(64u << 10) {}

v1::Event* ScratchEvent::Next() {
  if (event_ == nullptr || ++uses_ >= 64) {
    arena_.get()->Reset();
    uses_ = 0;
    event_ = google::protobuf::Arena::CreateMessage<v1::Event>(arena_.get());
  } else {
    event_->Clear();
  }
  return event_;
}

EventDecoder::EventDecoder(const TraceFile& file, const EventStream& stream)
    : file_(file), stream_(stream), resolution_(std::make_unique<Resolution>()) {}
EventDecoder::~EventDecoder() = default;
EventDecoder::EventDecoder(EventDecoder&&) noexcept = default;

void EventDecoder::Decode(uint64_t at, v1::Event* out) {
  const TraceBytes& b = *file_.bytes;
  const size_t len = DecodeRecord(b.data(), b.size(), at, out);
  since_trim_ += len;
  Apply(*resolution_, len, out);
  out->set_stream(stream_.stream);
  if (since_trim_ > (8u << 20)) {
    since_trim_ = 0;
    b.Trim();
  }
}

v1::Event DecodeAlone(const TraceFile& file, const EventStream& stream, uint64_t at) {
  v1::Event e;
  EventDecoder(file, stream).Decode(at, &e);
  return e;
}

uint64_t SeqAt(const TraceFile& file, uint64_t at) {
  return SeqOfRecord(file.bytes->data(), file.bytes->size(), at);
}

namespace {

TraceFile Read(const std::string& path, bool decoded) {
  TraceFile t;
  t.path = path;
  auto fail = [&](std::string msg) {
    t.problem = ReadProblem{text::Escape(path), 0, std::move(msg)};
    return t;
  };
  // Non-blocking: a FIFO put where a trace was must not hang us. Only regular files are
  // read, large ones through a mapping, so nothing is allocated for what the file
  // claims but does not hold (a sparse file of many GiB).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return fail(ErrnoText(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return fail(ErrnoText(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return fail("not a regular file: not an ldscope trace");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    close(fd);
    return fail("empty file: not an ldscope trace");
  }
  if (size > kMapAbove) {
    void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    close(fd);
    if (map == MAP_FAILED) return fail(ErrnoText(err));
    return ParseTraceBytes(path, std::make_shared<const TraceBytes>(static_cast<const uint8_t*>(map), size),
                           !decoded);
  }
  // Smaller files are copied: a mapping of a file truncated meanwhile (a new run
  // writing the same path) would fault. Never more than the size seen at the start.
  std::string buf(size, '\0');
  size_t got = 0;
  while (got < size) {
    const ssize_t r = read(fd, buf.data() + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      close(fd);
      return fail(ErrnoText(err));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  close(fd);
  buf.resize(got);
  auto bytes = std::make_shared<const TraceBytes>(std::move(buf));
  t = Index(path, bytes->data(), bytes->size(), !decoded);
  if (decoded)
    DecodeAll(&t, bytes->data(), bytes->size());
  else
    t.bytes = std::move(bytes);
  return t;
}

}  // namespace

TraceFile ReadTraceFile(const std::string& path) { return Read(path, true); }
TraceFile ReadTraceFileIndexed(const std::string& path) { return Read(path, false); }

bool Readable(const TraceFile& f) { return f.ok() || f.problem->offset > 0; }

std::map<uint32_t, std::string> TraceFilesByStream(const store::TraceSet& traces) {
  std::map<uint32_t, std::string> out;
  for (const auto& f : traces.files) {
    for (const auto& e : f.events) out.emplace(e.stream(), f.path);
    for (const auto& s : f.streams) out.emplace(s.stream, f.path);
    for (const auto& c : f.collector) out.emplace(c.second, f.path);
  }
  return out;
}

bool AnyReadable(const TraceSet& set) {
  for (const auto& f : set.files)
    if (Readable(f)) return true;
  return false;
}

Result<std::vector<std::string>> TraceNamesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Error{fmt::format("{}: {}", text::Escape(dir), ErrnoText(errno))};
  while (dirent* de = readdir(d)) {
    const std::string n = de->d_name;
    if (n.size() > 8 && n.compare(n.size() - 8, 8, ".ldscope") == 0) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  if (names.empty()) return Error{fmt::format("{}: no *.ldscope files in directory", text::Escape(dir))};
  return names;
}

namespace {

TraceSet Load(const std::vector<std::string>& paths, bool decoded, const FilesRead& read = {}) {
  TraceSet set;
  uint32_t next_stream = 1;
  auto add = [&](TraceFile&& f) {
    // Per-process files carry no stream numbers; collector files do. Renumber both
    // so streams are unique across everything loaded.
    uint32_t base = next_stream;
    uint32_t max_seen = 0;
    auto renumber = [&](uint32_t stream) {
      const uint32_t s = stream == 0 ? 1 : stream;
      max_seen = std::max(max_seen, s);
      return base + s - 1;
    };
    for (auto& e : f.events) e.set_stream(renumber(e.stream()));
    for (auto& s : f.streams) s.stream = renumber(s.file_stream);
    for (auto& c : f.collector) c.second = renumber(c.second);
    next_stream = base + std::max<uint32_t>(max_seen, 1);
    set.files.push_back(std::move(f));
  };
  // The files, directories listed, before any is read: the count `read` reports.
  std::vector<std::string> files;
  for (const auto& p : paths) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) {
      set.errors.push_back(fmt::format("{}: {}", text::Escape(p), ErrnoText(errno)));
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      files.push_back(p);
      continue;
    }
    const Result<std::vector<std::string>> names = TraceNamesIn(p);
    if (!names.ok()) {
      set.errors.push_back(names.error());
      continue;
    }
    for (const auto& n : *names) files.push_back(p + "/" + n);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    add(Read(files[i], decoded));
    if (read) read(i + 1, files.size());
  }
  return set;
}

}  // namespace

namespace {

// Whether a regular file starts as a trace does (its reader takes it: a valid header).
// A header longer than the first bytes counts as one.
bool StartsAsTrace(const std::string& file) {
  v1::TraceHeader h;
  const HeaderRead r = ReadTraceHeader(file, &h);
  return r == HeaderRead::kLonger || (r == HeaderRead::kParsed && h.format_version() != 0);
}

}  // namespace

std::optional<std::string> TooLarge(const std::vector<std::string>& paths) {
  uint64_t total = 0;
  // What a reader would read: a file that is no trace is refused by its reader unread.
  auto add = [&](const std::string& file) {
    struct stat st;
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && StartsAsTrace(file))
      total += static_cast<uint64_t>(st.st_size);
  };
  for (const auto& p : paths) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      add(p);
      continue;
    }
    if (const Result<std::vector<std::string>> names = TraceNamesIn(p); names.ok())
      for (const auto& n : *names) add(p + "/" + n);
  }
  if (total <= kMaxTraceBytes) return std::nullopt;
  return fmt::format(
      "too large: the traces given hold {} bytes, and ldscope reads at most {} bytes ({} GiB) "
      "of trace at once; read fewer of them at a time",
      total, kMaxTraceBytes, kMaxTraceBytes >> 30);
}

TraceSet LoadTraces(const std::vector<std::string>& paths) { return Load(paths, true); }
TraceSet LoadTracesIndexed(const std::vector<std::string>& paths, const FilesRead& read) {
  return Load(paths, false, read);
}

void DropEvents(TraceSet* set) {
  for (auto& f : set->files) {
    std::vector<v1::Event>().swap(f.events);
    std::vector<EventStream>().swap(f.streams);
    std::vector<std::pair<uint64_t, uint32_t>>().swap(f.collector);
    f.bytes.reset();
  }
}

TraceSet LoadTraceImage(const std::string& name, const std::string& bytes) {
  TraceSet set;
  set.files.push_back(ParseTrace(name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  for (auto& e : set.files.back().events)
    if (e.stream() == 0) e.set_stream(1);  // as LoadTraces numbers a single file
  return set;
}

HeaderRead ReadTraceHeader(const std::string& path, v1::TraceHeader* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return HeaderRead::kNone;
  struct stat st {};
  uint8_t buf[4096];
  ssize_t n = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = pread(fd, buf, sizeof buf, 0);
  close(fd);
  size_t pos = 0;
  uint64_t len = 0;
  if (n <= 0 || !wire::ReadVarint(buf, static_cast<size_t>(n), &pos, &len)) return HeaderRead::kNone;
  if (len > static_cast<uint64_t>(n) - pos) return HeaderRead::kLonger;
  return out->ParseFromArray(buf + pos, static_cast<int>(len)) ? HeaderRead::kParsed : HeaderRead::kNone;
}

}  // namespace ldscope::store
