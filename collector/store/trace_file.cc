// See trace_file.h.
#include "store/trace_file.h"
#include "store/trace_header.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "store/resolve.h"
#include "text/escape.h"
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

// The records of a file: header, facts, problem, and the event records indexed by
// stream (not decoded). The CollectorNotes and MountFacts records go to t.collector when indexed, else
// into their stream like any other. trim: the bytes, when a mapping (see TraceBytes::Trim).
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
  c.kind = indexed && (e.has_collector() || e.has_mount_facts()) ? Checked::kCollector : Checked::kEvent;
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
// most of the reading of a big trace); the results are the same however many.
void CheckAll(const uint8_t* data, const std::vector<RecordSpan>& spans, bool indexed,
              std::vector<Checked>* out) {
  out->assign(spans.size(), Checked{});
  const auto range = [&](size_t from, size_t to) {
    ScratchEvent scratch;
    for (size_t i = from; i < to; ++i)
      (*out)[i] = Check(data + spans[i].body, spans[i].len, indexed, scratch);
  };
  const size_t threads = std::min<size_t>({std::max(1u, std::thread::hardware_concurrency()), 8,
                                           spans.size() / 4096 + 1});
  if (threads == 1) return range(0, spans.size());
  std::vector<std::thread> pool;
  const size_t per = (spans.size() + threads - 1) / threads;
  for (size_t k = 1; k < threads; ++k)
    pool.emplace_back(range, std::min(spans.size(), k * per), std::min(spans.size(), (k + 1) * per));
  range(0, std::min(spans.size(), per));
  for (auto& th : pool) th.join();
}

TraceFile Index(const std::string& name, const uint8_t* data, size_t size, bool indexed,
                const TraceBytes* trim = nullptr) {
  TraceFile t;
  t.path = name;
  const std::string shown = text::Escape(name);  // a file name, too
  size_t pos = 0;
  bool have_header = false;
  // The streams as they are indexed, and whether each is in seq order so far (records
  // come in file order).
  struct Building {
    EventStream s;
    uint64_t last_seq = 0;
    bool sorted = true;
  };
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
    std::optional<ReadProblem> damage;  // where finding the records stopped
    const size_t block_end = std::min(size, pos + (8u << 20));
    while (pos < size && (pos < block_end || !have_header) && !damage) {
      const size_t start = pos;
      uint64_t len = 0;
      auto fail = [&](std::string msg) { damage = ReadProblem{shown, start, std::move(msg)}; };
      if (!wire::ReadVarint(data, size, &pos, &len)) {
        fail("truncated record length");
        break;
      }
      if (len > kMaxRecord) {
        fail(fmt::format("record length {} is not plausible (corrupt data)", len));
        break;
      }
      if (len > size - pos) {
        fail(fmt::format("truncated record: {} bytes declared, {} present", len, size - pos));
        break;
      }
      if (!have_header) {
        if (!t.header.ParseFromArray(data + pos, static_cast<int>(len)) ||
            t.header.format_version() == 0) {
          fail("not an ldscope trace (no valid header)");
          break;
        }
        if (t.header.format_version() != 1) {
          fail(fmt::format("unsupported trace format version {}", t.header.format_version()));
          break;
        }
        have_header = true;
      } else {
        spans.push_back({start, pos, static_cast<uint32_t>(len)});
      }
      pos += len;
    }
    CheckAll(data, spans, indexed, &checked);
    for (size_t i = 0; i < spans.size(); ++i) {
      const Checked& c = checked[i];
      const uint64_t start = spans[i].start;
      if (c.kind == Checked::kCorrupt) {
        t.problem = ReadProblem{shown, start, "corrupt event record"};
        break;
      }
      if (c.kind == Checked::kFacts) {
        t.facts.emplace_back(reinterpret_cast<const char*>(data + spans[i].body + c.facts_offset), c.facts_size);
      } else if (c.kind == Checked::kCollector) {
        t.collector.emplace_back(start, c.stream);
      } else {
        Building& b = streams[c.stream];
        if (!b.s.records.empty() && c.seq < b.last_seq) b.sorted = false;
        b.last_seq = c.seq;
        b.s.records.push_back(start);
        // Marked here, made indexes once the records are sorted.
        if (c.process_start) b.s.starts.push_back(static_cast<uint32_t>(b.s.records.size() - 1));
      }
    }
    if (t.ok() && damage) t.problem = std::move(damage);
  }
  if (t.ok() && !have_header) t.problem = ReadProblem{shown, 0, "empty file: not an ldscope trace"};
  t.header.set_host(text::Escape(t.header.host()));
  for (auto& entry : streams) {
    EventStream& s = entry.second.s;
    s.file_stream = s.stream = entry.first;
    s.records.shrink_to_fit();
    if (!entry.second.sorted) {
      // In seq order, equal seqs in file order (records are in file order so far); the
      // seqs read back from the records (a mapping's pages trimmed as they are read).
      const size_t n = s.records.size();
      std::vector<uint64_t> seqs(n);
      for (size_t i = 0; i < n; ++i) {
        seqs[i] = SeqOfRecord(data, size, s.records[i]);
        if (trim != nullptr && (i & 0x3ffff) == 0x3ffff) trim->Trim();
      }
      std::vector<char> is_start(n, 0);
      for (uint32_t i : s.starts) is_start[i] = 1;
      std::vector<uint32_t> order(n);
      for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return seqs[a] < seqs[b]; });
      RecordIndex records;
      s.starts.clear();
      for (uint32_t i = 0; i < order.size(); ++i) {
        records.push_back(s.records[order[i]]);
        if (is_start[order[i]]) s.starts.push_back(i);
      }
      records.shrink_to_fit();
      s.records = std::move(records);
    }
    t.streams.push_back(std::move(s));
  }
  return t;
}

// Decodes an indexed file's events into t->events, in file order, as they were read
// before indexing existed: resolved per stream in seq order, then escaped.
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
  for (auto& [at, e] : all) {
    EscapeStrings(&e);
    t->events.push_back(std::move(e));
  }
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

// A mapped trace that another program truncates while it is read (a new `run -o` on the
// same path) would kill this process with SIGBUS at the first page past the new end. The
// mappings are guarded instead: such a fault maps a page of zeros in place (where records
// then read as damaged) and is noted, the lowest page first, for the reader to report.
namespace {
struct Guard {
  std::atomic<uintptr_t> lo{0}, hi{0};
  std::atomic<uintptr_t> cut{UINTPTR_MAX};  // the lowest page replaced
};
constexpr int kGuards = 64;  // mappings guarded at once (more are read unguarded)
Guard g_guards[kGuards];
std::atomic<long> g_page{0};

void OnBus(int, siginfo_t* si, void*) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(si->si_addr);
  for (Guard& g : g_guards) {
    const uintptr_t lo = g.lo.load(), hi = g.hi.load();
    if (lo == 0 || at < lo || at >= hi) continue;
    const uintptr_t page = at & ~static_cast<uintptr_t>(g_page.load() - 1);
    if (mmap(reinterpret_cast<void*>(page), static_cast<size_t>(g_page.load()), PROT_READ,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
      break;
    uintptr_t seen = g.cut.load();
    while (page < seen && !g.cut.compare_exchange_weak(seen, page)) {
    }
    return;
  }
  signal(SIGBUS, SIG_DFL);  // not a guarded mapping: the fault comes again, as it would have
}

Guard* GuardMapping(const uint8_t* data, size_t size) {
  static const bool installed = [] {
    g_page = sysconf(_SC_PAGESIZE);
    struct sigaction sa {};
    sa.sa_sigaction = OnBus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, nullptr) == 0;
  }();
  if (!installed) return nullptr;
  for (Guard& g : g_guards) {
    uintptr_t free = 0;
    if (!g.lo.compare_exchange_strong(free, 1)) continue;  // taken
    g.cut = UINTPTR_MAX;
    g.hi = reinterpret_cast<uintptr_t>(data) + size;
    g.lo = reinterpret_cast<uintptr_t>(data);
    return &g;
  }
  return nullptr;
}
}  // namespace

TraceBytes::TraceBytes(const uint8_t* map, size_t size) : data_(map), size_(size), mapped_(true) {
  guard_ = GuardMapping(map, size);
}

TraceBytes::~TraceBytes() {
  if (guard_ != nullptr) static_cast<Guard*>(guard_)->lo = 0;
  if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
}

std::optional<uint64_t> TraceBytes::CutAt() const {
  if (guard_ == nullptr) return std::nullopt;
  const uintptr_t cut = static_cast<const Guard*>(guard_)->cut.load();
  if (cut == UINTPTR_MAX) return std::nullopt;
  // The page before the first that faulted: a cut file's last page reads as zeros past
  // its new end without a fault.
  const uintptr_t start = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t page = static_cast<uintptr_t>(g_page.load());
  return cut >= start + page ? cut - page - start : 0;
}

void TraceBytes::Trim() const {
  if (mapped_) madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
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
  EscapeStrings(out);
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

std::vector<uint64_t> RecordIndex::Whole(const Chunk& c) {
  std::vector<uint64_t> out;
  switch (c.form) {
    case Chunk::kSmall:
      out.reserve(c.small.capacity());
      for (size_t j = 0; j < c.small.size(); ++j) out.push_back(c.bases[j >> kBaseShift] + c.small[j]);
      break;
    case Chunk::kNarrow:
      out.reserve(c.narrow.capacity());
      for (const uint32_t lo : c.narrow) out.push_back(c.segment << 32 | lo);
      break;
    case Chunk::kWide: out = c.wide; break;
  }
  return out;
}

void RecordIndex::push_back(uint64_t at) {
  if ((size_ & kMask) == 0) chunks_.emplace_back();
  Chunk& c = chunks_.back();
  const size_t j = size_ & kMask;
  ++size_;
  if (c.form == Chunk::kSmall) {
    if ((j & ((size_t{1} << kBaseShift) - 1)) == 0) c.bases.push_back(at);
    const uint64_t base = c.bases.back();
    if (at >= base && at - base <= UINT16_MAX) {
      c.small.push_back(static_cast<uint16_t>(at - base));
      return;
    }
    // An offset too far from its base: the chunk's offsets 4 bytes each from now on, in
    // the segment of its first, or whole.
    std::vector<uint64_t> whole = Whole(c);
    whole.push_back(at);
    std::vector<uint64_t>().swap(c.bases);
    std::vector<uint16_t>().swap(c.small);
    c.segment = whole.front() >> 32;
    const bool one_segment =
        std::all_of(whole.begin(), whole.end(), [&](uint64_t v) { return v >> 32 == c.segment; });
    if (one_segment) {
      c.form = Chunk::kNarrow;
      c.narrow.reserve(std::max<size_t>(whole.capacity(), 16));
      for (const uint64_t v : whole) c.narrow.push_back(static_cast<uint32_t>(v));
    } else {
      c.form = Chunk::kWide;
      c.wide = std::move(whole);
    }
    return;
  }
  if (c.form == Chunk::kNarrow) {
    if (at >> 32 == c.segment) {
      c.narrow.push_back(static_cast<uint32_t>(at));
      return;
    }
    std::vector<uint64_t> whole = Whole(c);  // the chunk's first offset outside its segment
    std::vector<uint32_t>().swap(c.narrow);
    c.form = Chunk::kWide;
    c.wide = std::move(whole);
  }
  c.wide.push_back(at);
}

void RecordIndex::shrink_to_fit() {
  chunks_.shrink_to_fit();
  if (chunks_.empty()) return;
  Chunk& c = chunks_.back();
  c.bases.shrink_to_fit();
  c.small.shrink_to_fit();
  c.narrow.shrink_to_fit();
  c.wide.shrink_to_fit();
}

size_t RecordIndex::bytes() const {
  size_t n = chunks_.capacity() * sizeof(Chunk);
  for (const Chunk& c : chunks_)
    n += c.bases.capacity() * sizeof(uint64_t) + c.small.capacity() * sizeof(uint16_t) +
         c.narrow.capacity() * sizeof(uint32_t) + c.wide.capacity() * sizeof(uint64_t);
  return n;
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

TraceSet Load(const std::vector<std::string>& paths, bool decoded) {
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
  for (const auto& p : paths) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) {
      set.errors.push_back(fmt::format("{}: {}", text::Escape(p), ErrnoText(errno)));
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      add(Read(p, decoded));
      continue;
    }
    const Result<std::vector<std::string>> names = TraceNamesIn(p);
    if (!names.ok()) {
      set.errors.push_back(names.error());
      continue;
    }
    for (const auto& n : *names) add(Read(p + "/" + n, decoded));
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
TraceSet LoadTracesIndexed(const std::vector<std::string>& paths) { return Load(paths, false); }

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

TraceWriter::~TraceWriter() {
  if (begun_)
    Close().IgnoreError();  // an owner that wants the error calls Close() first
  else
    Discard();
}

Status TraceWriter::Prepare(const std::string& path) { return OpenOutput(path, &out_); }

bool TraceWriter::writes_stdout() const {
  if (out_.fd < 0) return false;
  if (out_.path == "-") return true;
  struct stat mine {
  }, one{};
  return out_.temp.empty() && fstat(out_.fd, &mine) == 0 && fstat(1, &one) == 0 && mine.st_dev == one.st_dev &&
         mine.st_ino == one.st_ino;
}

Status TraceWriter::Begin(const v1::TraceHeader& header) {
  begun_ = true;
  const std::string h = header.SerializeAsString();
  uint8_t prefix[10];
  const size_t n = static_cast<size_t>(wire::PutVarint(prefix, h.size()) - prefix);
  Record(prefix, n, reinterpret_cast<const uint8_t*>(h.data()), h.size(), nullptr, 0);
  if (Status s = Flush(); !s.ok()) return s;
  // From now on the trace is in place: a killed collector leaves what arrived readable.
  if (Status s = PublishOutput(&out_); !s.ok()) {
    error_ = EIO;
    return s;
  }
  return Status::Ok();
}

Status TraceWriter::WriteError() const {
  return Error{fmt::format("cannot write {}: {}", out_.path, ErrnoText(error_))};
}

void TraceWriter::Discard() {
  DiscardOutput(&out_);
  buf_.clear();
  record_ends_.clear();
}

Status TraceWriter::Open(const std::string& path, const v1::TraceHeader& header) {
  if (Status s = Prepare(path); !s.ok()) return s;
  return Begin(header);
}

void TraceWriter::Record(const uint8_t* head, size_t hn, const uint8_t* body, size_t bn,
                         const uint8_t* tail, size_t tn) {
  for (std::string* s : {&buf_, keep_copy_ ? &copy_ : nullptr}) {
    if (s == nullptr) continue;
    s->append(reinterpret_cast<const char*>(head), hn);
    s->append(reinterpret_cast<const char*>(body), bn);
    if (tn > 0) s->append(reinterpret_cast<const char*>(tail), tn);
  }
  ++records_;
  if (error_ != 0) {  // nothing more reaches the file after a failure
    buf_.clear();
    return;
  }
  record_ends_.push_back(buf_.size());
  // A failure is kept in error_; AppendEvent and Close() report it.
  if (buf_.size() >= (1u << 20)) Flush().IgnoreError();
}

Status TraceWriter::AppendEvent(const uint8_t* data, size_t size, uint32_t stream) {
  if (out_.fd < 0 || !begun_) return Error{"the trace file is not open for writing"};
  constexpr uint64_t kStreamTag = wire::Tag(v1::Event::kStreamFieldNumber, wire::kVarint);
  static_assert(kStreamTag < 0x80, "a one-byte tag");
  uint8_t tail[12];
  tail[0] = kStreamTag;
  const size_t tn = static_cast<size_t>(wire::PutVarint(tail + 1, stream) - tail);
  uint8_t prefix[10];
  const size_t pn = static_cast<size_t>(wire::PutVarint(prefix, size + tn) - prefix);
  Record(prefix, pn, data, size, tail, tn);
  return error_ == 0 ? Status::Ok() : WriteError();
}

// Stops writing at the first error; a regular file is cut back to its last whole
// record so that it reads back as a clean (if short) trace.
void TraceWriter::Fail(int err, size_t done) {
  error_ = err;
  size_t whole = 0, n = 0;
  for (size_t end : record_ends_) {
    if (end > done) break;
    whole = end;
    ++n;
  }
  records_written_ += n;
  if (out_.regular && done > whole && ftruncate(out_.fd, static_cast<off_t>(written_ + whole)) == 0)
    done = whole;
  written_ += done;
  buf_.clear();
  record_ends_.clear();
}

Status TraceWriter::Flush() {
  if (error_ != 0) return WriteError();
  if (out_.fd < 0) return Status::Ok();
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t r = write(out_.fd, buf_.data() + done, buf_.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      Fail(r < 0 ? errno : EIO, done);
      return WriteError();
    }
    done += static_cast<size_t>(r);
  }
  written_ += done;
  records_written_ += record_ends_.size();
  buf_.clear();
  record_ends_.clear();
  return Status::Ok();
}

Status TraceWriter::Close() {
  if (out_.fd < 0) return Status::Ok();
  if (!begun_) {
    Discard();
    return Status::Ok();
  }
  Flush().IgnoreError();  // a failure is in error_, reported below with what was lost
  // What was written whole replaces the file; nothing at all leaves it as it was.
  Status closed = Status::Ok();
  if (error_ != 0 && records_written_ == 0)
    DiscardOutput(&out_);
  else
    closed = CommitOutput(&out_);
  if (error_ != 0) {
    // The header is record 1; the rest are events.
    const uint64_t events = records_ > 0 ? records_ - 1 : 0;
    const uint64_t kept = records_written_ > 0 ? records_written_ - 1 : 0;
    return Error{fmt::format("writing {} failed after {} bytes: {}; the trace is incomplete: {} of {} "
                             "events written",
                             out_.path == "-" ? "standard output" : out_.path, written_,
                             ErrnoText(error_), kept, events)};
  }
  return closed;
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
