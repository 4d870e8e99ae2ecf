// See pyhook.h.
#include "ipc/pyhook.h"

#include <cstring>
#include <deque>
#include <limits>
#include <string_view>

#include "ldscope_proto/events.pb.h"

namespace ldscope::ipc {
namespace {

constexpr size_t kMaxString = 4096;             // as the hook always cut them
constexpr size_t kMaxOutput = 4u << 20;         // converted bytes per datagram
constexpr int kMaxDepth = 5;  // header, events, event, frames, frame, its items
constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();

// One marshal object. Containers hold pointers into the reader's pool.
struct Obj {
  enum Kind { kNone, kBool, kInt, kStr, kBytes, kSeq } kind = kNone;
  bool complete = false;  // a reference may only name an object read to its end
  bool b = false;
  uint64_t i = 0;         // ints: the magnitude
  bool negative = false;  // (only marshal's int, 32 bits, may be)
  std::string_view s;     // str and bytes: the datagram's bytes
  std::vector<const Obj*> items;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // The one top-level object, which must end the data.
  const Obj* ReadAll() {
    const Obj* o = Read(0);
    return o != nullptr && pos_ == size_ ? o : nullptr;
  }

 private:
  bool Fixed(size_t n, uint64_t* out) {  // little-endian, n <= 4
    if (size_ - pos_ < n) return false;
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(data_[pos_ + k]) << (8 * k);
    pos_ += n;
    *out = v;
    return true;
  }

  Obj* New(Obj::Kind kind, bool ref) {
    pool_.emplace_back();
    Obj* o = &pool_.back();
    o->kind = kind;
    if (ref) refs_.push_back(o);
    return o;
  }

  const Obj* Read(int depth) {
    if (pos_ >= size_ || depth > kMaxDepth) return nullptr;
    const uint8_t code = data_[pos_++];
    const bool ref = (code & 0x80) != 0;
    uint64_t n = 0;
    Obj* o = nullptr;
    switch (code & 0x7f) {
      case 'N':
        o = New(Obj::kNone, ref);
        break;
      case 'T':
      case 'F':
        o = New(Obj::kBool, ref);
        o->b = (code & 0x7f) == 'T';
        break;
      case 'i':  // int32
        if (!Fixed(4, &n)) return nullptr;
        o = New(Obj::kInt, ref);
        o->negative = (n & 0x80000000u) != 0;
        o->i = o->negative ? 0x100000000u - n : n;
        break;
      case 'l': {  // int32 count of 15-bit digits, negative for a negative number
        if (!Fixed(4, &n) || (n & 0x80000000u) != 0 || n > 5) return nullptr;
        uint64_t v = 0;
        for (uint64_t k = 0; k < n; ++k) {
          uint64_t d = 0;
          if (!Fixed(2, &d) || d >= (1u << 15)) return nullptr;
          if (k == 4 && d >= 8) return nullptr;  // past 63 bits
          v |= d << (15 * k);
        }
        o = New(Obj::kInt, ref);
        o->i = v;
        break;
      }
      case 'u':  // str: UTF-8, lone surrogates as marshal writes them
      case 't':
      case 'a':  // str: ASCII
      case 'A':
      case 's':  // bytes
        if (!Fixed(4, &n)) return nullptr;
        [[fallthrough]];
      case 'z':  // str: ASCII, short
      case 'Z':
        if ((code & 0x7f) == 'z' || (code & 0x7f) == 'Z') {
          if (!Fixed(1, &n)) return nullptr;
        }
        if (n > size_ - pos_) return nullptr;
        o = New((code & 0x7f) == 's' ? Obj::kBytes : Obj::kStr, ref);
        o->s = std::string_view(reinterpret_cast<const char*>(data_ + pos_), n);
        pos_ += n;
        break;
      case '(':
      case '[':
      case ')': {
        if (!Fixed((code & 0x7f) == ')' ? 1 : 4, &n) || n > size_ - pos_) return nullptr;
        o = New(Obj::kSeq, ref);  // numbered before its items, as marshal does
        o->items.reserve(n);
        for (uint64_t k = 0; k < n; ++k) {
          const Obj* item = Read(depth + 1);
          if (item == nullptr) return nullptr;
          o->items.push_back(item);
        }
        break;
      }
      case 'r':  // a reference to an object read before
        if (ref || !Fixed(4, &n) || n >= refs_.size() || !refs_[n]->complete) return nullptr;
        return refs_[n];
      default:
        return nullptr;
    }
    o->complete = true;
    return o;
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::deque<Obj> pool_;     // stable addresses
  std::vector<Obj*> refs_;
};

bool Int(const Obj* o, uint64_t max, uint64_t* out) {
  if (o->kind != Obj::kInt || o->negative || o->i > max) return false;
  *out = o->i;
  return true;
}

// PyCode_Addr2Line of CPython 3.11 and 3.12 (Objects/codeobject.c) over a code object's
// location table (Objects/locations.md): the line of the code unit at byte offset
// `offset`, -1 where it has none (f_lineno is None then). The table is the peer's:
// every read is bounded, and a malformed one just gives some line.
int64_t Addr2Line(std::string_view t, int64_t line, int64_t offset) {
  if (offset < 0) return line;
  int64_t end = 0;
  size_t i = 0;
  while (i < t.size()) {
    const uint8_t b = static_cast<uint8_t>(t[i]);
    const int code = (b >> 3) & 15;
    if (code == 13 || code == 14) {  // a signed varint follows: 6 bits a byte, bit 6: more
      uint32_t val = 0;
      unsigned shift = 0;
      for (size_t k = i + 1; k < t.size(); ++k) {
        const uint8_t r = static_cast<uint8_t>(t[k]);
        if (shift < 32) val |= static_cast<uint32_t>(r & 63) << shift;
        shift += 6;
        if ((r & 64) == 0) break;
      }
      line += (val & 1) != 0 ? -static_cast<int64_t>(val >> 1) : static_cast<int64_t>(val >> 1);
    } else if (code >= 10 && code <= 12) {
      line += code - 10;
    }
    end += ((b & 7) + 1) * 2;
    if (offset < end) return code == 15 ? -1 : line;
    do {
      ++i;
    } while (i < t.size() && (static_cast<uint8_t>(t[i]) & 128) == 0);
  }
  return -1;
}

// A marshal str's bytes as os.fsencode makes them (see pyhook.h).
std::string FsBytes(std::string_view s) {
  auto surrogate = [&](size_t i) {  // ED A0..BF xx: U+D800..U+DFFF
    return static_cast<uint8_t>(s[i]) == 0xED && i + 2 < s.size() &&
           (static_cast<uint8_t>(s[i + 1]) & 0xE0) == 0xA0;
  };
  auto code = [&](size_t i) {
    return 0xD000u | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
           (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
  };
  bool any = false, escapes_only = true;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!surrogate(i)) continue;
    any = true;
    const unsigned c = code(i);
    if (c < 0xDC80 || c > 0xDCFF) escapes_only = false;
    i += 2;
  }
  if (!any) return std::string(s);
  std::string out;
  out.reserve(s.size());
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < s.size(); ++i) {
    if (!surrogate(i)) {
      out.push_back(s[i]);
      continue;
    }
    const unsigned c = code(i);
    if (escapes_only) {
      out.push_back(static_cast<char>(c & 0xFF));
    } else {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(c >> shift) & 0xF]);
    }
    i += 2;
  }
  return out;
}

// Strict UTF-8 (what libprotobuf requires of a `string` field).
bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const uint8_t d = static_cast<uint8_t>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

class Converter {
 public:
  // A string field (str or bytes), cut to kMaxString.
  bool Str(const Obj* o, std::string* out) {
    if (o->kind == Obj::kBytes) {
      *out = std::string(o->s);
    } else if (o->kind == Obj::kStr) {
      *out = FsBytes(o->s);
    } else {
      return false;
    }
    if (out->size() > kMaxString) {
      out->resize(kMaxString);
      cut_ = true;
    }
    return true;
  }

  // A `string` field of the schema: valid UTF-8 as well.
  bool Text(const Obj* o, std::string* out) { return Str(o, out) && ValidUtf8(*out); }

  bool Frame(const Obj* file, const Obj* line, const Obj* function, v1::PyFrame* f) {
    uint64_t n = 0;
    if (line->kind != Obj::kNone && !Int(line, kU32, &n)) return false;
    f->set_line(static_cast<uint32_t>(n));
    return Str(file, f->mutable_file()) && Str(function, f->mutable_function());
  }

  bool Event(const Obj* o, v1::Event* e) {
    cut_ = false;
    if (o->kind != Obj::kSeq || o->items.size() < 3) return false;
    const auto& it = o->items;
    uint64_t kind = 0, tid = 0, ns = 0, n = 0;
    if (!Int(it[0], 4, &kind) || !Int(it[1], kU32, &tid) || !Int(it[2], UINT64_MAX, &ns))
      return false;
    e->set_tid(static_cast<uint32_t>(tid));
    e->set_mono_ns(ns);
    switch (kind) {
      case 0: {  // PyImportBegin
        if (it.size() != 5 && it.size() != 8) return false;
        auto* b = e->mutable_py_import();
        if (!Str(it[3], b->mutable_module()) || !Int(it[4], kU32, &n)) return false;
        b->set_dlopen_flags(static_cast<uint32_t>(n));
        if (it.size() == 8 && !Frame(it[5], it[6], it[7], b->add_stack())) return false;
        break;
      }
      case 4: {  // PyImportBegin, its line found here
        if (it.size() != 10 || it[7]->kind != Obj::kBytes || it[8]->kind != Obj::kInt ||
            it[9]->kind != Obj::kInt || it[8]->i > kU32 || it[9]->i > kU32)
          return false;
        auto* b = e->mutable_py_import();
        if (!Str(it[3], b->mutable_module()) || !Int(it[4], kU32, &n)) return false;
        b->set_dlopen_flags(static_cast<uint32_t>(n));
        auto* f = b->add_stack();
        const auto signed_int = [](const Obj* o) {
          return o->negative ? -static_cast<int64_t>(o->i) : static_cast<int64_t>(o->i);
        };
        const int64_t line = Addr2Line(it[7]->s, signed_int(it[8]), signed_int(it[9]));
        f->set_line(line < 0 ? 0 : static_cast<uint32_t>(line));
        if (!Str(it[5], f->mutable_file()) || !Str(it[6], f->mutable_function())) return false;
        break;
      }
      case 1: {  // PyImportEnd
        if (it.size() != 4 && it.size() != 5) return false;
        auto* b = e->mutable_py_import_end();
        if (!Str(it[3], b->mutable_module())) return false;
        if (it.size() == 5) {
          b->set_failed(true);
          if (!Str(it[4], b->mutable_error())) return false;
        }
        break;
      }
      case 2: {  // PyStart
        if (it.size() != 7 || it[5]->kind != Obj::kSeq || it[6]->kind != Obj::kBool) return false;
        auto* b = e->mutable_py_start();
        if (!Str(it[3], b->mutable_executable()) || !Text(it[4], b->mutable_version())) return false;
        for (const Obj* m : it[5]->items)
          if (!Str(m, b->add_hook_modules())) return false;
        b->set_forked(it[6]->b);
        break;
      }
      case 3: {  // PyDlopen
        if (it.size() != 7 || it[6]->kind != Obj::kSeq) return false;
        auto* b = e->mutable_py_dlopen();
        if (!Str(it[3], b->mutable_name()) || !Text(it[4], b->mutable_via())) return false;
        if (it[5]->kind != Obj::kNone) {
          if (!Int(it[5], kU32, &n)) return false;
          b->set_mode(static_cast<uint32_t>(n));
        }
        for (const Obj* f : it[6]->items)
          if (f->kind != Obj::kSeq || f->items.size() != 3 ||
              !Frame(f->items[0], f->items[1], f->items[2], b->add_stack()))
            return false;
        break;
      }
    }
    if (cut_) e->set_truncated(true);
    return true;
  }

 private:
  bool cut_ = false;
};

}  // namespace

bool IsPyHookDatagram(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x00 && data[1] == 0x01;
}

bool DecodePyHookDatagram(const uint8_t* data, size_t size, std::vector<std::string>* out) {
  out->clear();
  if (!IsPyHookDatagram(data, size)) return false;
  Reader reader(data + 2, size - 2);
  const Obj* head = reader.ReadAll();
  uint64_t pid = 0, seq = 0, dropped = 0;
  if (head == nullptr || head->kind != Obj::kSeq || head->items.size() != 4 ||
      !Int(head->items[0], kU32, &pid) || pid == 0 || !Int(head->items[1], UINT64_MAX, &seq) ||
      !Int(head->items[2], UINT64_MAX, &dropped) || head->items[3]->kind != Obj::kSeq ||
      head->items[3]->items.empty())
    return false;
  Converter conv;
  size_t total = 0;
  for (const Obj* o : head->items[3]->items) {
    v1::Event e;
    e.set_pid(static_cast<uint32_t>(pid));
    e.set_seq(seq++);
    e.set_dropped(dropped);
    if (!conv.Event(o, &e) || (total += e.ByteSizeLong()) > kMaxOutput) {
      out->clear();
      return false;
    }
    out->push_back(e.SerializeAsString());
  }
  return true;
}

}  // namespace ldscope::ipc
