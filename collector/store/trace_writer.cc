// See trace_writer.h.
#include "store/trace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "wire.h"

namespace ldscope::store {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

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

void TraceWriter::Record(const uint8_t* head, size_t hn, const uint8_t* body, size_t bn, const uint8_t* tail,
                         size_t tn) {
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
  if (out_.regular && done > whole && ftruncate(out_.fd, static_cast<off_t>(written_ + whole)) == 0) done = whole;
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
    return Error{
        fmt::format("writing {} failed after {} bytes: {}; the trace is incomplete: {} of {} "
                    "events written",
                    out_.path == "-" ? "standard output" : out_.path, written_, ErrnoText(error_), kept, events)};
  }
  return closed;
}

}  // namespace ldscope::store
