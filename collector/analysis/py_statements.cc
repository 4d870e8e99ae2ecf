#include "analysis/py_statements.h"

#include <cstring>

namespace ldscope::analysis {
namespace {

constexpr int kNotStart = -1;  // a blank line, a comment, or inside a statement begun earlier

// For each line, the indentation of the logical line it starts, or kNotStart. A small
// scanner: brackets, backslashes, strings (triple-quoted ones across lines) and comments.
std::vector<int> LogicalStarts(const std::vector<std::string>& lines) {
  std::vector<int> indent(lines.size(), kNotStart);
  int depth = 0;
  bool continued = false;
  const char* triple = nullptr;  // the open triple quote, if any
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& l = lines[n];
    size_t i = 0;
    const bool inside = depth > 0 || continued || triple != nullptr;
    continued = false;
    while (i < l.size() && (l[i] == ' ' || l[i] == '\t')) ++i;
    if (!inside && i < l.size() && l[i] != '#' && l[i] != '\r') indent[n] = static_cast<int>(i);
    for (; i < l.size(); ++i) {
      const char c = l[i];
      if (triple != nullptr) {
        if (l.compare(i, 3, triple) == 0) {
          i += 2;
          triple = nullptr;
        } else if (c == '\\') {
          ++i;
        }
      } else if (c == '#') {
        break;
      } else if (c == '"' || c == '\'') {
        if (l.compare(i, 3, std::string(3, c)) == 0) {
          triple = c == '"' ? "\"\"\"" : "'''";
          i += 2;
          continue;
        }
        for (++i; i < l.size() && l[i] != c; ++i)
          if (l[i] == '\\') ++i;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
        --depth;
      } else if (c == '\\' && i + 1 == l.size()) {
        continued = true;
      }
    }
  }
  return indent;
}

bool Begins(const std::string& line, int indent, const char* word) {
  const size_t n = std::strlen(word);
  if (line.compare(static_cast<size_t>(indent), n, word) != 0) return false;
  const size_t after = static_cast<size_t>(indent) + n;
  return after == line.size() || line[after] == ' ' || line[after] == ':' || line[after] == '(';
}

// A clause that continues the statement above it at the same indentation.
bool Clause(const std::string& line, int indent) {
  for (const char* w : {"except", "else", "elif", "finally"})
    if (Begins(line, indent, w)) return true;
  return false;
}

struct Span {
  uint32_t first = 0, last = 0;  // 0-based
};

// The statement at indentation `level` that holds line n (0-based), or false.
bool StatementAt(const std::vector<std::string>& lines, const std::vector<int>& indent, uint32_t n, int level,
                 Span* s) {
  uint32_t first = n;
  while (indent[first] == kNotStart || indent[first] > level || Clause(lines[first], level)) {
    if (first == 0) return false;
    --first;
  }
  if (indent[first] < level) return false;
  uint32_t last = first;
  for (uint32_t k = first + 1; k < lines.size(); ++k) {
    if (indent[k] != kNotStart && (indent[k] < level || (indent[k] == level && !Clause(lines[k], level)))) break;
    last = k;
  }
  // Trailing blank and comment lines belong to nobody.
  while (last > first && indent[last] == kNotStart) {
    const std::string& l = lines[last];
    const size_t i = l.find_first_not_of(" \t\r");
    if (i != std::string::npos && l[i] != '#') break;  // the statement's own continuation
    --last;
  }
  s->first = first;
  s->last = last;
  return true;
}

// A definition, or a decorator of one: moving it reorders no call.
bool Definition(const std::string& line, int level) {
  return line[static_cast<size_t>(level)] == '@' || Begins(line, level, "def") || Begins(line, level, "class") ||
         Begins(line, level, "async");
}

}  // namespace

bool MoveAbove(const std::vector<std::string>& lines, uint32_t late, uint32_t early, StatementMove* out) {
  if (early == 0 || early >= late || late > lines.size()) return false;
  const std::vector<int> indent = LogicalStarts(lines);
  Span theirs, mine;
  // The level: the lesser indentation of the two lines' logical lines (the start at or
  // above each).
  const auto start_indent = [&](uint32_t n) {
    while (indent[n] == kNotStart && n > 0) --n;
    return indent[n];
  };
  const int a = start_indent(early - 1), b = start_indent(late - 1);
  if (a == kNotStart || b == kNotStart) return false;
  const int level = a < b ? a : b;
  if (!StatementAt(lines, indent, early - 1, level, &theirs) || !StatementAt(lines, indent, late - 1, level, &mine))
    return false;
  if (mine.first <= theirs.last) return false;  // one statement holds both
  for (uint32_t k = theirs.last + 1; k < mine.first; ++k)
    if (indent[k] != kNotStart && indent[k] < level) return false;  // another block
  if (Definition(lines[mine.first], level) || Definition(lines[theirs.first], level)) return false;
  *out = {mine.first + 1, mine.last + 1, theirs.first + 1, theirs.last + 1};
  return true;
}

}  // namespace ldscope::analysis
