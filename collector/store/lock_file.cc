// See lock_file.h.
#include "store/lock_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <optional>
#include <regex>
#include <tuple>

#include <fmt/format.h>

// toml++ compiled into this file alone (no shared library: the portable build links
// nothing it does not carry), reporting errors as values rather than exceptions, and
// without its writers (FormatLock writes the layout itself).
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include "text/escape.h"

namespace ldscope::store {
namespace {

// The parser's tree takes up to about 40 bytes per byte of TOML (an array of one-digit
// integers): 16 MiB of lock (80,000 library lines and more) bounds it near 700 MiB.
constexpr off_t kMaxLockSize = 16 << 20;

const char kHeader[] =
    "# ldscope lock file: the shared libraries each program of a workload loaded.\n"
    "# Written by `ldscope lock`; checked by `ldscope check --lock` and `ldscope run --lock`.\n"
    "# Each library: its root (system, site-packages, conda, venv, cuda, or / for an\n"
    "# absolute path), its file relative to that root, its version and build-id\n"
    "# ('unknown' where ldscope could not read them).\n";

// A TOML literal string of escaped text: `'` (which a literal string cannot hold) as
// \x27, and, as a net, any control character as \xNN (escaped text has none).
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\'' || u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out + "'";
}

auto Tie(const v1::LockedFile& f) {
  return std::tie(f.root(), f.file(), f.version(), f.build_id());
}

std::string FileTable(const v1::LockedFile& f) {
  return fmt::format("{{ root = {}, file = {}, version = {}, build-id = {} }}", Quote(f.root()),
                     Quote(f.file()), Quote(f.version()), Quote(f.build_id()));
}

// A string of the lock (a key or a value, TOML-decoded) as ldscope's escaped text, in
// the one spelling text::Escape gives: `\x27` (how the writer spells a `'`, which a
// literal string cannot hold) is `'`, and a backslash that starts no escape (`"a\\'b"`
// decodes to a\'b) is one escaped backslash, so that what FormatLock writes of it
// reads back the same. A control character is an error (escaped text has none).
Result<std::string> EscapedText(std::string_view raw) {
  for (char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return Error{"a control character in a string"};
  }
  return text::Escape(text::Unescape(raw));
}

// Where a node of the document starts, for an error: its line.
uint32_t LineOf(const toml::node& n) { return n.source().begin.line; }

struct LineError {
  uint32_t line;
  std::string what;
};

// A TOML type's word for an error ("expected a table, not an integer").
std::string_view TypeWord(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date or time";
  }
}

const char kFileTable[] = "{ root = '…', file = '…', version = '…', build-id = '…' }";

// One copy of a library: { root = '…', file = '…', version = '…', build-id = '…' }.
std::optional<LineError> FileTableOf(const toml::node& n, v1::LockedFile* f) {
  const toml::table* t = n.as_table();
  if (t == nullptr) return LineError{LineOf(n), fmt::format("expected {}, not {}", kFileTable, TypeWord(n))};
  for (auto&& [k, v] : *t) {
    const std::string_view key = k.str();
    if (key != "root" && key != "file" && key != "version" && key != "build-id")
      return LineError{LineOf(v), fmt::format("unknown key '{}' (root, file, version, build-id)", text::Escape(key))};
    const toml::value<std::string>* s = v.as_string();
    if (s == nullptr) return LineError{LineOf(v), fmt::format("{} is {}, not a string", key, TypeWord(v))};
    Result<std::string> value = EscapedText(s->get());
    if (!value.ok()) return LineError{LineOf(v), value.error()};
    if (value->empty())
      return LineError{LineOf(v), fmt::format("{} is empty (write 'unknown' for what was not read)", key)};
    if (key == "root") {
      if (!IsLockRoot(*value))
        return LineError{LineOf(v), fmt::format("unknown root '{}' (system, site-packages, conda, venv, cuda, /)",
                                                text::Escape(*value))};
      f->set_root(*value);
    } else if (key == "file") {
      f->set_file(*value);
    } else if (key == "version") {
      f->set_version(*value);
    } else {
      f->set_build_id(*value);
    }
  }
  if (t->size() != 4) return LineError{LineOf(n), "each library needs root, file, version and build-id"};
  return std::nullopt;
}

// The parsed document as a lock.
std::optional<LineError> LockOf(const toml::table& doc, v1::Lock* lock) {
  const toml::node* format = doc.get("format");
  if (format == nullptr)
    return LineError{1, doc.empty() ? "empty: no `format = 1` (is this an ldscope lock file?)"
                                    : "no `format = 1` (is this an ldscope lock file?)"};
  const toml::value<int64_t>* number = format->as_integer();
  if (number == nullptr || number->get() != kLockFormat)
    return LineError{LineOf(*format), number == nullptr
                                          ? fmt::format("the format is {}, not a number", TypeWord(*format))
                                          : fmt::format("unsupported lock format {} (this ldscope reads format {})",
                                                        number->get(), kLockFormat)};
  lock->set_format(kLockFormat);
  // Two keys that differ in TOML's spelling only ('a\\x27b' and "a'b") are one name.
  // (TOML's tables iterate in key order: the later line of the two is the one reported.)
  std::map<std::string, uint32_t> keys;
  for (auto&& [k, v] : doc) {
    if (k.str() != "format" && k.str() != "program")
      return LineError{LineOf(v), fmt::format("unknown key '{}' (format, program)", text::Escape(k.str()))};
  }
  const toml::node* programs_node = doc.get("program");
  if (programs_node == nullptr) return std::nullopt;
  const toml::table* programs = programs_node->as_table();
  if (programs == nullptr) return LineError{LineOf(*programs_node), "expected [program.'EXECUTABLE'] tables"};
  for (auto&& [pk, pv] : *programs) {
    Result<std::string> key = EscapedText(pk.str());
    if (!key.ok()) return LineError{LineOf(pv), key.error()};
    if (key->empty()) return LineError{LineOf(pv), "the program's name is empty"};
    const toml::table* libraries = pv.as_table();
    if (libraries == nullptr)
      return LineError{LineOf(pv), fmt::format("program '{}' is {}, not a [program.'EXECUTABLE'] table",
                                               text::Escape(*key), TypeWord(pv))};
    if (auto [it, added] = keys.emplace(*key, LineOf(pv)); !added)
      return LineError{std::max(it->second, LineOf(pv)), fmt::format("program '{}' given twice", text::Escape(*key))};
    std::map<std::string, uint32_t> names;
    v1::LockedProgram* program = lock->add_programs();
    program->set_key(*key);
    for (auto&& [lk, lv] : *libraries) {
      Result<std::string> lib = EscapedText(lk.str());
      if (!lib.ok()) return LineError{LineOf(lv), lib.error()};
      if (lib->empty()) return LineError{LineOf(lv), "the library's name is empty"};
      if (auto [it, added] = names.emplace(*lib, LineOf(lv)); !added)
        return LineError{std::max(it->second, LineOf(lv)), fmt::format("library '{}' given twice in program '{}'",
                                                                       text::Escape(*lib), text::Escape(*key))};
      v1::LockedLibrary* l = program->add_libraries();
      l->set_name(*lib);
      if (const toml::array* copies = lv.as_array()) {
        if (copies->empty())
          return LineError{LineOf(lv), fmt::format("library '{}' has no copies", text::Escape(*lib))};
        for (const toml::node& c : *copies)
          if (auto e = FileTableOf(c, l->add_copies())) return e;
      } else if (auto e = FileTableOf(lv, l->add_copies())) {
        return e;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

bool IsLockRoot(const std::string& root) {
  static const std::set<std::string> roots = {"system", "site-packages", "conda", "venv", "cuda", "/"};
  return roots.count(root) > 0;
}

std::string Rooted(const std::string& root, const std::string& file) {
  return root == "/" ? file : root + ":" + file;
}

void CanonicalLock(v1::Lock* lock) {
  auto* programs = lock->mutable_programs();
  for (auto& p : *programs) {
    auto* libs = p.mutable_libraries();
    for (auto& l : *libs) {
      auto* copies = l.mutable_copies();
      std::sort(copies->begin(), copies->end(),
                [](const v1::LockedFile& a, const v1::LockedFile& b) { return Tie(a) < Tie(b); });
      for (int i = copies->size() - 1; i > 0; --i)
        if (Tie(copies->Get(i)) == Tie(copies->Get(i - 1))) copies->DeleteSubrange(i, 1);
    }
    std::sort(libs->begin(), libs->end(),
              [](const v1::LockedLibrary& a, const v1::LockedLibrary& b) { return a.name() < b.name(); });
  }
  std::sort(programs->begin(), programs->end(),
            [](const v1::LockedProgram& a, const v1::LockedProgram& b) { return a.key() < b.key(); });
}

std::string FormatLock(const v1::Lock& in) {
  v1::Lock lock = in;
  CanonicalLock(&lock);
  std::string out = kHeader;
  out += fmt::format("format = {}\n", kLockFormat);
  for (const auto& p : lock.programs()) {
    out += fmt::format("\n[program.{}]\n", Quote(p.key()));
    for (const auto& l : p.libraries()) {
      if (l.copies_size() == 1) {
        out += fmt::format("{} = {}\n", Quote(l.name()), FileTable(l.copies(0)));
        continue;
      }
      std::vector<std::string> tables;
      for (const auto& f : l.copies()) tables.push_back(FileTable(f));
      out += fmt::format("{} = [{}]\n", Quote(l.name()), fmt::join(tables, ", "));
    }
  }
  return out;
}

Result<v1::Lock> ParseLock(std::string_view text, const std::string& name) {
  toml::parse_result doc = toml::parse(text, name);
  if (!doc) {
    const toml::parse_error& e = doc.error();
    // toml++ writes what it saw escaped already; a control character would still be one.
    // "cannot redefine existing table 'KEY'": toml++ 3.3 garbles KEY; the line and
    // column say where.
    static const std::regex redefine("(cannot redefine existing [a-z-]+) '.*'$");
    const std::string description =
        std::regex_replace(std::string(e.description()), redefine, "$1 (each key and table once)");
    std::string what;
    for (char c : description) {
      const auto u = static_cast<unsigned char>(c);
      what += u < 0x20 || u == 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
    }
    return Error{fmt::format("{}:{}:{}: {}", name, std::max<uint32_t>(e.source().begin.line, 1),
                             std::max<uint32_t>(e.source().begin.column, 1), what)};
  }
  v1::Lock lock;
  if (auto e = LockOf(doc.table(), &lock)) return Error{fmt::format("{}:{}: {}", name, e->line, e->what)};
  CanonicalLock(&lock);
  return lock;
}

Result<v1::Lock> ReadLockFile(const std::string& path) {
  const std::string shown = text::Escape(path);
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Error{fmt::format("cannot read the lock file {}: {}", shown, std::strerror(errno))};
  struct stat st {};
  std::string text;
  std::string problem;
  if (fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_size > kMaxLockSize) {
    problem = "larger than 16 MiB";
  } else {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = std::strerror(errno);
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > static_cast<size_t>(kMaxLockSize)) {
        problem = "larger than 16 MiB";
        break;
      }
    }
  }
  close(fd);
  if (!problem.empty()) return Error{fmt::format("cannot read the lock file {}: {}", shown, problem)};
  return ParseLock(text, shown);
}

}  // namespace ldscope::store
