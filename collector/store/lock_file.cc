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
#include <tuple>

#include <fmt/format.h>

#include "text/escape.h"

namespace ldscope::store {
namespace {

constexpr off_t kMaxLockSize = 64 << 20;

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

// One line of a lock file, read left to right.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  void Blanks() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool Eat(char c) {
    Blanks();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool EatWord(std::string_view w) {
    Blanks();
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  // A bare key (A-Za-z0-9_-).
  std::string BareKey() {
    Blanks();
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' ||
                              s_[i_] == '-'))
      ++i_;
    return std::string(s_.substr(start, i_ - start));
  }
  // A literal string; its text with \x27 turned back into `'`.
  Result<std::string> Literal() {
    if (!Eat('\'')) {
      return Error{"expected a '…' string"};
    }
    const size_t end = s_.find('\'', i_);
    if (end == std::string_view::npos) {
      return Error{"unterminated '…' string"};
    }
    const std::string_view raw = s_.substr(i_, end - i_);
    i_ = end + 1;
    std::string out;
    for (size_t k = 0; k < raw.size(); ++k) {
      const auto u = static_cast<unsigned char>(raw[k]);
      if (u < 0x20 || u == 0x7f) {
        return Error{"a control character in a string"};
      }
      if (raw[k] == '\\' && k + 1 < raw.size() && raw[k + 1] == '\\') {
        out += "\\\\";
        ++k;
      } else if (raw.substr(k, 4) == "\\x27") {
        out += '\'';
        k += 3;
      } else {
        out += raw[k];
      }
    }
    return out;
  }
  // Only blanks and a comment left.
  bool AtEnd() {
    Blanks();
    return i_ == s_.size() || s_[i_] == '#';
  }
  std::string_view Rest() const { return s_.substr(i_); }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

Status FileTableOf(Cursor& c, v1::LockedFile* f) {
  if (!c.Eat('{')) {
    return Error{"expected { root = '…', file = '…', version = '…', build-id = '…' }"};
  }
  std::set<std::string> seen;
  for (;;) {
    const std::string key = c.BareKey();
    if (key != "root" && key != "file" && key != "version" && key != "build-id") {
      return Error{key.empty() ? "expected a key (root, file, version, build-id)"
                           : fmt::format("unknown key '{}' (root, file, version, build-id)", key)};
    }
    if (!seen.insert(key).second) {
      return Error{fmt::format("'{}' given twice", key)};
    }
    if (!c.Eat('=')) {
      return Error{fmt::format("expected = after {}", key)};
    }
    Result<std::string> literal = c.Literal();
    if (!literal.ok()) return literal.status();
    const std::string value = std::move(literal).value();
    if (value.empty()) {
      return Error{fmt::format("{} is empty (write 'unknown' for what was not read)", key)};
    }
    if (key == "root") {
      if (!IsLockRoot(value)) {
        return Error{fmt::format("unknown root '{}' (system, site-packages, conda, venv, cuda, /)",
                             text::Escape(value))};
      }
      f->set_root(value);
    } else if (key == "file") {
      f->set_file(value);
    } else if (key == "version") {
      f->set_version(value);
    } else {
      f->set_build_id(value);
    }
    if (c.Eat('}')) break;
    if (!c.Eat(',')) {
      return Error{"expected , or }"};
    }
  }
  if (seen.size() != 4) {
    return Error{"each library needs root, file, version and build-id"};
  }
  return Status::Ok();
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
  v1::Lock parsed;
  v1::Lock* lock = &parsed;
  std::set<std::string> programs;
  std::set<std::string> libraries;  // of the current program
  v1::LockedProgram* program = nullptr;
  bool have_format = false;
  size_t line_no = 0;
  size_t pos = 0;
  auto fail = [&](const std::string& what) -> Result<v1::Lock> {
    return Error{fmt::format("{}:{}: {}", name, line_no, what)};
  };
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Cursor c(line);
    if (c.AtEnd()) continue;  // blank, or a comment
    if (!have_format) {
      if (!c.EatWord("format") || !c.Eat('='))
        return fail("expected `format = 1` before anything else (is this an ldscope lock file?)");
      c.Blanks();
      const std::string v(c.Rest().substr(0, c.Rest().find_first_of(" \t#")));
      if (v != std::to_string(kLockFormat))
        return fail(fmt::format("unsupported lock format {} (this ldscope reads format {})",
                                text::Escape(v), kLockFormat));
      c.EatWord(v);
      if (!c.AtEnd()) return fail("unexpected text after the format");
      have_format = true;
      lock->set_format(kLockFormat);
      continue;
    }
    if (c.Eat('[')) {
      if (!c.EatWord("program") || !c.Eat('.'))
        return fail("expected [program.'EXECUTABLE']");
      const Result<std::string> literal = c.Literal();
      if (!literal.ok()) return fail(literal.error());
      const std::string& key = *literal;
      if (!c.Eat(']') || !c.AtEnd()) return fail("expected ] ending [program.'EXECUTABLE']");
      if (key.empty()) return fail("the program's name is empty");
      if (!programs.insert(key).second)
        return fail(fmt::format("program '{}' given twice", text::Escape(key)));
      program = lock->add_programs();
      program->set_key(key);
      libraries.clear();
      continue;
    }
    if (program == nullptr) return fail("a library outside a [program.'…'] table");
    const Result<std::string> literal = c.Literal();
    if (!literal.ok())
      return fail("expected 'LIBRARY' = { root = '…', file = '…', version = '…', build-id = '…' }");
    const std::string& lib = *literal;
    if (lib.empty()) return fail("the library's name is empty");
    if (!c.Eat('=')) return fail(fmt::format("expected = after '{}'", text::Escape(lib)));
    if (!libraries.insert(lib).second)
      return fail(fmt::format("library '{}' given twice in program '{}'", text::Escape(lib),
                              text::Escape(program->key())));
    auto* l = program->add_libraries();
    l->set_name(lib);
    if (c.Eat('[')) {
      do {
        if (Status t = FileTableOf(c, l->add_copies()); !t.ok()) return fail(t.error());
      } while (c.Eat(','));
      if (!c.Eat(']')) return fail("expected ] after the copies");
    } else if (Status t = FileTableOf(c, l->add_copies()); !t.ok()) {
      return fail(t.error());
    }
    if (!c.AtEnd()) return fail("unexpected text after the library");
  }
  if (!have_format) {
    line_no = std::max<size_t>(line_no, 1);
    return fail("empty: no `format = 1` (is this an ldscope lock file?)");
  }
  CanonicalLock(lock);
  return parsed;
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
    problem = "larger than 64 MiB";
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
        problem = "larger than 64 MiB";
        break;
      }
    }
  }
  close(fd);
  if (!problem.empty()) return Error{fmt::format("cannot read the lock file {}: {}", shown, problem)};
  return ParseLock(text, shown);
}

}  // namespace ldscope::store
