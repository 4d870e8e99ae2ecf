// See facts.h.
#include "elf/facts.h"

#include <zlib.h>

#include <fmt/format.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "text/escape.h"

namespace ldscope::elf {
namespace {

// 4 and 8 are not written, and a reader ignores them where a record has them.
enum Flag : uint8_t {
  kDefined = 1, kWeak = 2, kUnique = 16, kData = 32, kHidden = 64, kNamed = 128,
};

// One zlib stream per thread, reset for each object instead of made anew: compress2()
// allocates and clears about 270 KiB of deflate state per call, which was most of the
// time `run` spent adding facts for many small libraries (2,000 of them: 140 ms). The
// output is compress2()'s (level 6, a zlib header, 32 KiB window, default strategy).
class Deflater {
 public:
  Deflater() { ok_ = deflateInit(&z_, 6) == Z_OK; }
  ~Deflater() {
    if (ok_) deflateEnd(&z_);
  }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  std::string Compress(const std::string& in) {
    if (!ok_ || deflateReset(&z_) != Z_OK) return "";
    std::string out(deflateBound(&z_, in.size()), '\0');
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    z_.next_out = reinterpret_cast<Bytef*>(out.data());
    z_.avail_out = static_cast<uInt>(out.size());
    if (deflate(&z_, Z_FINISH) != Z_STREAM_END) return "";
    out.resize(out.size() - z_.avail_out);
    return out;
  }

 private:
  z_stream z_{};
  bool ok_ = false;
};

std::string Compress(const std::string& in) {
  if (in.size() > (256u << 20)) return "";
  thread_local Deflater deflater;
  return deflater.Compress(in);
}

// The same for reading: one inflate stream per thread, reset for each record.
class Inflater {
 public:
  Inflater() { ok_ = inflateInit(&z_) == Z_OK; }
  ~Inflater() {
    if (ok_) inflateEnd(&z_);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  bool Decompress(const std::string& in, size_t size, std::string* out) {
    if (!ok_ || inflateReset(&z_) != Z_OK) return false;
    out->assign(size, '\0');
    // One byte more than expected (as uncompress() does for an empty result), so that a
    // stream longer than `size` shows instead of stopping where the room ends.
    out->push_back('\0');
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    z_.next_out = reinterpret_cast<Bytef*>(out->data());
    z_.avail_out = static_cast<uInt>(out->size());
    const bool whole = inflate(&z_, Z_FINISH) == Z_STREAM_END && z_.total_out == size;
    out->pop_back();
    return whole;
  }

 private:
  z_stream z_{};
  bool ok_ = false;
};

// The bounds on a record's symbols, checked before anything is inflated or allocated: a
// trace is untrusted input, and a few kilobytes of zlib can declare gigabytes (see
// docs/ARCHITECTURE.md, "Bounds on reading a trace"). Real records inflate a few times
// over (hashes do not compress, names about fourfold) and hold at most one symbol per
// compressed byte (a hash is 8 incompressible bytes, a name several).
constexpr size_t kMaxSymbolsSize = 32u << 20;  // inflated bytes of one record
constexpr size_t kMaxInflation = 32;           // inflated bytes per compressed byte
constexpr size_t kSlack = 4096;                // for tiny records

// Why a record's declared symbols are refused ("" when they are within the bounds).
std::string SymbolsTooLarge(const v1::ObjectFacts& f) {
  const size_t zlib = f.symbols_zlib().size(), size = f.symbols_size();
  if (size > kMaxSymbolsSize)
    return fmt::format("too large: the trace's facts of this file declare {} bytes of symbols (at most {})", size,
                       kMaxSymbolsSize);
  if (size > kMaxInflation * zlib + kSlack)
    return fmt::format(
        "too large: the trace's facts of this file declare {} bytes of symbols in {} compressed "
        "bytes (at most {} times as many)",
        size, zlib, kMaxInflation);
  return "";
}

bool Decompress(const std::string& in, size_t size, std::string* out) {
  if (size > kMaxSymbolsSize) return false;
  thread_local Inflater inflater;
  return inflater.Decompress(in, size, out);
}

// Everything ToFacts records but the symbols.
v1::ObjectFacts FactsWithoutSymbols(const ElfInfo& e, const std::map<std::string, std::vector<std::string>>& found) {
  v1::ObjectFacts f;
  f.add_paths(std::string(e.path));
  f.set_build_id(e.build_id);
  f.set_size(e.size);
  f.set_mtime_ns(e.mtime_ns);
  f.set_dev(e.dev);
  f.set_ino(e.ino);
  f.set_machine(e.machine);
  f.set_soname(std::string(e.soname));
  for (const auto& n : e.needed) f.add_needed(std::string(n));
  f.set_rpath(std::string(e.rpath));
  f.set_runpath(std::string(e.runpath));
  f.set_flags_1(e.flags_1);
  f.set_dt_flags(e.dt_flags);
  f.set_tls_size(e.tls_size);
  f.set_tls_align(e.tls_align);
  f.set_tls_first_byte(e.tls_first_byte);
  if (e.gnu_stack) f.set_stack_flags(e.stack_flags);
  for (const auto& v : e.verdefs) f.add_verdefs(std::string(v));
  for (const auto& vn : e.verneeds) {
    auto* n = f.add_verneeds();
    n->set_file(std::string(vn.file));
    for (const auto& v : vn.versions) n->add_versions(std::string(v));
  }
  for (const auto& [needle, strings] : found) {
    auto* x = f.add_found();
    x->set_needle(needle);
    for (const auto& s : strings) x->add_strings(std::string(s));
  }
  return f;
}

// f with its symbol table s (flags as bytes, one per symbol), compressed.
v1::ObjectFacts WithSymbols(v1::ObjectFacts f, v1::SymbolFacts* s, std::string flags) {
  s->set_flags(std::move(flags));
  s->set_defined_complete(false);
  const std::string bytes = s->SerializeAsString();
  f.set_symbols_zlib(Compress(bytes));
  f.set_symbols_size(static_cast<uint32_t>(bytes.size()));
  return f;
}

}  // namespace

v1::ObjectFacts ToFacts(const ElfInfo& e, const std::function<Keep(const Symbol&)>& keep,
                        const std::map<std::string, std::vector<std::string>>& found) {
  v1::ObjectFacts f = FactsWithoutSymbols(e, found);
  v1::SymbolFacts s;
  std::map<std::pair<std::string_view, std::string_view>, uint32_t> version_index;
  std::string flags;
  e.ForEachSymbol(ElfInfo::Which::kAll, [&](const Symbol& sym) {
    const Keep k = sym.defined ? keep(sym) : Keep::kName;
    if (k == Keep::kDrop) return;
    uint8_t b = (sym.defined ? kDefined : 0) | (sym.weak ? kWeak : 0) | (sym.unique ? kUnique : 0) |
                (sym.data ? kData : 0) | (sym.hidden ? kHidden : 0) | (k == Keep::kName ? kNamed : 0);
    flags.push_back(static_cast<char>(b));
    if (k == Keep::kName)
      s.add_names(std::string(sym.name));
    else s.add_hashes(HashOf(sym));
    if (sym.version.empty()) {
      s.add_version(0);
      return;
    }
    auto [it, inserted] = version_index.try_emplace({sym.version, sym.version_file},
                                                    static_cast<uint32_t>(version_index.size()));
    if (inserted) {
      auto* v = s.add_versions();
      v->set_name(std::string(sym.version));
      v->set_file(std::string(sym.version_file));
    }
    s.add_version(it->second + 1);
  });
  return WithSymbols(std::move(f), &s, std::move(flags));
}

static_assert(PreparedFacts::kNamed == kNamed);

PreparedFacts PrepareFacts(const ElfInfo& e, const std::function<bool(const Symbol&)>& named,
                           const std::map<std::string, std::vector<std::string>>& found) {
  PreparedFacts p;
  p.record = FactsWithoutSymbols(e, found);
  std::map<std::pair<std::string_view, std::string_view>, uint32_t> version_index;
  e.ForEachSymbol(ElfInfo::Which::kAll, [&](const Symbol& sym) {
    const bool full = !sym.defined || named(sym);
    const uint8_t b = (sym.defined ? kDefined : 0) | (sym.weak ? kWeak : 0) | (sym.unique ? kUnique : 0) |
                      (sym.data ? kData : 0) | (sym.hidden ? kHidden : 0) | (full ? kNamed : 0);
    PreparedFacts::Sym s{0, 0, b, sym.defined};
    if (!sym.defined) p.undefined.push_back(HashOf(sym));
    if (full) {
      p.names += std::string(sym.name);
      p.name_ends.push_back(static_cast<uint32_t>(p.names.size()));
    } else {
      s.hash = HashOf(sym);
    }
    if (!sym.version.empty()) {
      auto [it, inserted] = version_index.try_emplace({sym.version, sym.version_file},
                                                      static_cast<uint32_t>(version_index.size()));
      if (inserted) p.versions.emplace_back(std::string(sym.version), std::string(sym.version_file));
      s.version = it->second + 1;
    }
    p.symbols.push_back(s);
  });
  return p;
}

v1::ObjectFacts FinishFacts(const PreparedFacts& p, const std::function<bool(uint64_t)>& keep_hash) {
  v1::ObjectFacts f = p.record;
  v1::SymbolFacts s;
  // ToFacts numbers the versions in the order the kept symbols first use them.
  std::vector<uint32_t> index(p.versions.size(), 0);
  uint32_t used = 0;
  std::string flags;
  size_t name = 0;
  for (const PreparedFacts::Sym& sym : p.symbols) {
    if (sym.flags & kNamed) {
      const uint32_t begin = name == 0 ? 0 : p.name_ends[name - 1];
      s.add_names(p.names.substr(begin, p.name_ends[name] - begin));
      ++name;
    } else {
      if (sym.defined && !keep_hash(sym.hash)) continue;
      s.add_hashes(sym.hash);
    }
    flags.push_back(static_cast<char>(sym.flags));
    if (sym.version == 0) {
      s.add_version(0);
      continue;
    }
    uint32_t& i = index[sym.version - 1];
    if (i == 0) {
      i = ++used;
      auto* v = s.add_versions();
      v->set_name(p.versions[sym.version - 1].first);
      v->set_file(p.versions[sym.version - 1].second);
    }
    s.add_version(i);
  }
  return WithSymbols(std::move(f), &s, std::move(flags));
}

v1::ObjectFacts UnreadableFacts(const std::string& path, const std::string& error) {
  v1::ObjectFacts f;
  f.add_paths(std::string(path));
  f.set_unreadable(error.empty() ? "unreadable" : error);
  return f;
}

// The dynamic section's facts, PT_TLS, PT_GNU_STACK and the strings found in the file,
// from the record (the bytes, as reading the file gives them).
static void DynamicFromFacts(const v1::ObjectFacts& f, ElfInfo* e) {
  e->soname = f.soname();
  for (const auto& n : f.needed()) e->needed.push_back(n);
  e->rpath = f.rpath();
  e->runpath = f.runpath();
  e->flags_1 = f.flags_1();
  e->dt_flags = f.dt_flags();
  e->tls_size = f.tls_size();
  e->tls_align = f.tls_align();
  e->tls_first_byte = f.tls_first_byte();
  e->gnu_stack = f.has_stack_flags();
  e->stack_flags = f.stack_flags();
  for (const auto& v : f.verdefs()) e->verdefs.push_back(v);
  for (const auto& vn : f.verneeds()) {
    VersionNeed n;
    n.file = vn.file();
    for (const auto& v : vn.versions()) n.versions.push_back(v);
    e->verneeds.push_back(std::move(n));
  }
  for (const auto& x : f.found()) {
    auto& list = e->found[x.needle()];
    for (const auto& s : x.strings()) list.push_back(s);
  }
}

Result<std::unique_ptr<ElfInfo>> FromFacts(const v1::ObjectFacts& f, const std::string& path) {
  if (!f.unreadable().empty()) {
    return Error{f.unreadable()};
  }
  auto e = std::make_unique<ElfInfo>();
  e->path = path;
  e->from_trace = true;
  e->build_id = f.build_id();
  e->size = f.size();
  e->mtime_ns = f.mtime_ns();
  e->dev = f.dev();
  e->ino = f.ino();
  e->machine = static_cast<uint16_t>(f.machine());
  DynamicFromFacts(f, e.get());
  if (const std::string why = SymbolsTooLarge(f); !why.empty()) return Error{why};
  std::string bytes;
  v1::SymbolFacts s;
  if (!f.symbols_zlib().empty() &&
      (!Decompress(f.symbols_zlib(), f.symbols_size(), &bytes) || !s.ParseFromString(bytes))) {
    return Error{"the trace's facts of this file are damaged (symbols)"};
  }
  e->defined_complete = s.defined_complete();
  std::vector<std::pair<std::string_view, std::string_view>> versions;
  for (const auto& v : s.versions()) versions.emplace_back(e->Keep(v.name()), e->Keep(v.file()));
  const std::string& flags = s.flags();
  if (flags.size() > f.symbols_zlib().size() + kSlack) {
    return Error{
        fmt::format("too large: the trace's facts of this file declare {} symbols in {} compressed bytes "
                    "(at most one per byte)",
                    flags.size(), f.symbols_zlib().size())};
  }
  if (static_cast<size_t>(s.version_size()) != flags.size()) {
    return Error{"the trace's facts of this file are damaged (symbol versions)"};
  }
  int name = 0, hash = 0;
  std::vector<Symbol> symbols;
  symbols.reserve(flags.size());
  for (size_t i = 0; i < flags.size(); ++i) {
    const auto b = static_cast<uint8_t>(flags[i]);
    Symbol sym;
    if (b & kNamed) {
      if (name >= s.names_size()) break;
      sym.name = e->Keep(s.names(name++));
      if (sym.name.empty()) sym.hash = NameHash(sym.name);
    } else {
      if (hash >= s.hashes_size()) break;
      sym.hash = s.hashes(hash++);
    }
    sym.defined = b & kDefined;
    sym.weak = b & kWeak;
    sym.unique = b & kUnique;
    sym.data = b & kData;
    sym.hidden = b & kHidden;
    const uint32_t v = s.version(static_cast<int>(i));
    if (v > 0 && v <= versions.size()) {
      sym.version = versions[v - 1].first;
      sym.version_file = versions[v - 1].second;
    }
    symbols.push_back(sym);
  }
  e->SetTraceSymbols(std::move(symbols));
  return e;
}

bool FactsRecord::Decode(v1::ObjectFacts* out) const { return out->ParseFromString(bytes); }

bool ScanFacts(std::string bytes, FactsRecord* out) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  FactsRecord r;
  auto read_bytes = [&](std::string* s) {
    uint32_t len = 0;
    return in.ReadVarint32(&len) && in.ReadString(s, static_cast<int>(len));
  };
  while (uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    bool ok = true;
    if (field == 1 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED)
      ok = read_bytes(&r.paths.emplace_back());
    else if (field == 2 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED)
      ok = read_bytes(&r.build_id);
    else if (field == 3 && type == WireFormatLite::WIRETYPE_VARINT)
      ok = in.ReadVarint64(&r.size);
    else if (field == 4 && type == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v = 0;
      ok = in.ReadVarint64(&v);
      r.mtime_ns = static_cast<int64_t>(v);
    } else if (field == 8 && type == WireFormatLite::WIRETYPE_VARINT) {
      ok = in.ReadVarint32(&r.machine);
    } else if (field == 7 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED)
      ok = read_bytes(&r.unreadable) && WireFormatLite::VerifyUtf8String(r.unreadable.data(),
                                                                           static_cast<int>(r.unreadable.size()),
                                                                           WireFormatLite::PARSE, "unreadable");
    else
      ok = WireFormatLite::SkipField(&in, tag);
    if (!ok) return false;
  }
  if (!in.ConsumedEntireMessage() || in.CurrentPosition() != static_cast<int>(bytes.size())) return false;
  r.bytes = std::move(bytes);
  *out = std::move(r);
  return true;
}

void TraceFacts::Add(const v1::ObjectFacts& f) { Add(f.SerializeAsString()); }

bool TraceFacts::Add(std::string bytes) {
  auto r = std::make_unique<FactsRecord>();
  if (!ScanFacts(std::move(bytes), r.get())) return false;
  records_.push_back(std::move(r));
  const FactsRecord* rec = records_.back().get();
  for (const auto& p : rec->paths) by_path_[p] = rec;
  if (!rec->build_id.empty() && rec->unreadable.empty()) by_build_id_[rec->build_id] = rec;
  return true;
}

const FactsRecord* TraceFacts::ForPath(const std::string& path) const {
  auto it = by_path_.find(path);
  return it == by_path_.end() ? nullptr : it->second;
}

const FactsRecord* TraceFacts::ForBuildId(const std::string& raw_build_id) const {
  auto it = by_build_id_.find(raw_build_id);
  return it == by_build_id_.end() ? nullptr : it->second;
}

}  // namespace ldscope::elf
