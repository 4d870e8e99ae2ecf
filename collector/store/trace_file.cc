// See trace_file.h.
#include "store/trace_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "text/escape.h"
#include "wire.h"

namespace ldscope::store {
namespace {

// Largest record we accept; anything bigger is corruption, not data.
constexpr uint64_t kMaxRecord = 64u << 20;

std::string ErrnoText(int err) { return std::strerror(err); }

// Undoes the audit library's wire economies, per process image in sequence order:
// timestamps sent as offsets from the image's start, search names sent once per
// search, candidate directories interned per connection (see events.proto).
void Resolve(std::vector<v1::Event>* events) {
  std::map<uint32_t, std::vector<v1::Event*>> by_stream;
  for (auto& e : *events) by_stream[e.stream()].push_back(&e);
  for (auto& [stream, evs] : by_stream) {
    std::stable_sort(evs.begin(), evs.end(),
                     [](const v1::Event* a, const v1::Event* b) { return a->seq() < b->seq(); });
    uint64_t image_start = 0;
    std::unordered_map<uint32_t, std::string> dirs;
    std::string name;
    for (v1::Event* e : evs) {
      if (e->has_process_start()) {
        image_start = e->process_start().image_start_ns();
        dirs.clear();  // a new connection (or file) starts a new table
      }
      if (e->mono_ns() == 0) e->set_mono_ns(image_start + e->offset_ns());
      if (!e->has_search()) continue;
      v1::Search* s = e->mutable_search();
      if (!s->name().empty()) {
        name = s->name();
      } else {
        s->set_name(name);
      }
      if (s->dir_ref() == 0) continue;
      if (!s->dir().empty()) dirs[s->dir_ref()] = s->dir();
      auto it = dirs.find(s->dir_ref());
      s->set_candidate((it != dirs.end() ? it->second : std::string("(unknown directory)")) + "/" +
                       (s->base().empty() ? name : s->base()));
      s->clear_dir_ref();
      s->clear_dir();
      s->clear_base();
    }
  }
}

void Esc(std::string* s) {
  if (!s->empty()) *s = text::Escape(*s);
}
void Esc(google::protobuf::RepeatedPtrField<std::string>* list) {
  for (auto& s : *list) Esc(&s);
}
void Esc(v1::PyFrame* f) {
  Esc(f->mutable_file());
  Esc(f->mutable_function());
}

// The read boundary of the byte strings: from here on (timeline, analysis, report,
// every renderer) they are escaped text. After Resolve, which joins raw bytes.
void EscapeStrings(v1::Event* e) {
  switch (e->body_case()) {
    case v1::Event::kProcessStart: {
      auto* p = e->mutable_process_start();
      Esc(p->mutable_exe());
      Esc(p->mutable_argv());
      Esc(p->mutable_cwd());
      for (auto& v : *p->mutable_env()) {
        Esc(v.mutable_name());
        Esc(v.mutable_value());
      }
      break;
    }
    case v1::Event::kSearch:
      Esc(e->mutable_search()->mutable_name());
      Esc(e->mutable_search()->mutable_candidate());
      Esc(e->mutable_search()->mutable_dir());
      Esc(e->mutable_search()->mutable_base());
      break;
    case v1::Event::kObjopen: {
      auto* o = e->mutable_objopen();
      Esc(o->mutable_path());
      Esc(o->mutable_soname());
      Esc(o->mutable_needed());
      Esc(o->mutable_rpath());
      Esc(o->mutable_runpath());
      break;
    }
    case v1::Event::kPyStart:
      Esc(e->mutable_py_start()->mutable_executable());
      Esc(e->mutable_py_start()->mutable_hook_modules());
      break;
    case v1::Event::kPyImport:
      Esc(e->mutable_py_import()->mutable_module());
      for (auto& f : *e->mutable_py_import()->mutable_stack()) Esc(&f);
      break;
    case v1::Event::kPyImportEnd:
      Esc(e->mutable_py_import_end()->mutable_module());
      Esc(e->mutable_py_import_end()->mutable_error());
      break;
    case v1::Event::kPyDlopen:
      Esc(e->mutable_py_dlopen()->mutable_name());
      for (auto& f : *e->mutable_py_dlopen()->mutable_stack()) Esc(&f);
      break;
    default: break;
  }
}

}  // namespace

TraceFile ParseTrace(const std::string& name, const uint8_t* data, size_t size) {
  TraceFile t;
  t.path = name;
  const std::string shown = text::Escape(name);  // a file name, too
  size_t pos = 0;
  bool have_header = false;
  while (pos < size) {
    const size_t start = pos;
    uint64_t len = 0;
    auto fail = [&](std::string msg) {
      t.ok = false;
      t.problem = {shown, start, std::move(msg)};
    };
    if (!ReadVarint(data, size, &pos, &len)) {
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
      v1::Event e;
      if (!e.ParseFromArray(data + pos, static_cast<int>(len)) || e.pid() == 0) {
        fail("corrupt event record");
        break;
      }
      t.events.push_back(std::move(e));
    }
    pos += len;
  }
  if (t.ok && !have_header) {
    t.ok = false;
    t.problem = {shown, 0, "empty file: not an ldscope trace"};
  }
  Resolve(&t.events);
  for (auto& e : t.events) EscapeStrings(&e);
  t.header.set_host(text::Escape(t.header.host()));
  return t;
}

TraceFile ReadTraceFile(const std::string& path) {
  TraceFile t;
  t.path = path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    t.ok = false;
    t.problem = {text::Escape(path), 0, ErrnoText(errno)};
    return t;
  }
  std::string buf;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r < 0) {
        t.ok = false;
        t.problem = {text::Escape(path), buf.size(), ErrnoText(errno)};
      }
      break;
    }
    buf.append(chunk, static_cast<size_t>(r));
  }
  close(fd);
  if (!t.ok) return t;
  return ParseTrace(path, reinterpret_cast<const uint8_t*>(buf.data()), buf.size());
}

TraceSet LoadTraces(const std::vector<std::string>& paths) {
  TraceSet set;
  uint32_t next_stream = 1;
  auto add = [&](TraceFile&& f) {
    // Per-process files carry no stream numbers; collector files do. Renumber both
    // so streams are unique across everything loaded.
    uint32_t base = next_stream;
    uint32_t max_seen = 0;
    for (auto& e : f.events) {
      const uint32_t s = e.stream() == 0 ? 1 : e.stream();
      max_seen = std::max(max_seen, s);
      e.set_stream(base + s - 1);
    }
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
      add(ReadTraceFile(p));
      continue;
    }
    DIR* d = opendir(p.c_str());
    if (d == nullptr) {
      set.errors.push_back(fmt::format("{}: {}", text::Escape(p), ErrnoText(errno)));
      continue;
    }
    std::vector<std::string> names;
    while (dirent* de = readdir(d)) {
      const std::string n = de->d_name;
      if (n.size() > 8 && n.compare(n.size() - 8, 8, ".ldscope") == 0) names.push_back(n);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    if (names.empty()) set.errors.push_back(fmt::format("{}: no *.ldscope files in directory", text::Escape(p)));
    for (const auto& n : names) add(ReadTraceFile(p + "/" + n));
  }
  return set;
}

TraceWriter::~TraceWriter() { Close(); }

std::string TraceWriter::Open(const std::string& path, const v1::TraceHeader& header) {
  f_ = std::fopen(path.c_str(), "wbe");
  if (f_ == nullptr) return fmt::format("cannot write {}: {}", path, ErrnoText(errno));
  path_ = path;
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  const std::string h = header.SerializeAsString();
  uint8_t prefix[10];
  const size_t n = static_cast<size_t>(wire::PutVarint(prefix, h.size()) - prefix);
  if (std::fwrite(prefix, 1, n, f_) != n || std::fwrite(h.data(), 1, h.size(), f_) != h.size())
    return fmt::format("cannot write {}: {}", path, ErrnoText(errno));
  bytes_ += n + h.size();
  return "";
}

bool TraceWriter::AppendEvent(const uint8_t* data, size_t size, uint32_t stream) {
  if (f_ == nullptr || failed_) return false;
  // Field 7 (stream), varint: tag 0x38.
  uint8_t tail[12];
  tail[0] = 0x38;
  const size_t tn = static_cast<size_t>(wire::PutVarint(tail + 1, stream) - tail);
  uint8_t prefix[10];
  const size_t pn = static_cast<size_t>(wire::PutVarint(prefix, size + tn) - prefix);
  if (std::fwrite(prefix, 1, pn, f_) != pn || std::fwrite(data, 1, size, f_) != size ||
      std::fwrite(tail, 1, tn, f_) != tn) {
    failed_ = true;
    return false;
  }
  bytes_ += pn + size + tn;
  return true;
}

bool TraceWriter::Flush() { return f_ != nullptr && !failed_ && std::fflush(f_) == 0; }

std::string TraceWriter::Close() {
  if (f_ == nullptr) return "";
  const bool ok = !failed_ && std::fflush(f_) == 0;
  const int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) return fmt::format("writing {} failed: {}", path_, ErrnoText(err));
  return "";
}

bool ReadVarint(const uint8_t* data, size_t size, size_t* pos, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= size) return false;
    const uint8_t b = data[(*pos)++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

}  // namespace ldscope::store
