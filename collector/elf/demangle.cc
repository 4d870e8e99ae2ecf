// See demangle.h. libstdc++'s demangler (the collector is linked statically with it).
#include "elf/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace ldscope::elf {
namespace {

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size()))
    s->replace(at, from.size(), to);
}

// Removes every "[abi:...]" tag.
std::string WithoutAbiTags(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 5, "[abi:") == 0) {
      const size_t end = s.find(']', i);
      if (end != std::string_view::npos) {
        i = end + 1;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool Identifier(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string Demangle(std::string_view name) {
  if (name.size() < 3 || name.size() > kMaxMangled || name.substr(0, 2) != "_Z") return "";
  const std::string z(name);
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status),
                                                  &std::free);
  return status == 0 && out != nullptr ? std::string(out.get()) : "";
}

std::string WithoutParameters(std::string_view demangled) {
  std::string s = WithoutAbiTags(demangled);
  // Qualifiers of a member function and of its reference binding follow the parameters.
  for (bool again = true; again;) {
    again = false;
    for (std::string_view q : {" const", " volatile", " &&", " &", " noexcept"})
      if (EndsWith(s, q)) {
        s.resize(s.size() - q.size());
        again = true;
      }
  }
  if (s.empty() || s.back() != ')') return s;
  // The parameter list is the parenthesised group that ends the name (function
  // pointer parameters nest parentheses inside it).
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos || open == 0) return s;
  const std::string prefix = s.substr(0, open);
  // A function template's name starts with its return type: the name is what follows
  // the last space outside template arguments and parentheses ("(anonymous namespace)").
  size_t start = 0;
  int angle = 0, paren = 0;
  for (size_t i = 0; i < prefix.size(); ++i) {
    const char c = prefix[i];
    if (c == '<') ++angle;
    if (c == '>' && angle > 0) --angle;
    if (c == '(') ++paren;
    if (c == ')' && paren > 0) --paren;
    if (c == ' ' && angle == 0 && paren == 0) start = i + 1;
  }
  return prefix.substr(start);
}

std::string OldAbiSpelling(std::string_view demangled) {
  std::string s = WithoutAbiTags(demangled);
  ReplaceAll(&s, "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string");
  ReplaceAll(&s, "std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string");
  ReplaceAll(&s, "std::__cxx11::", "std::");
  return s;
}

bool UsesCxx11Abi(std::string_view demangled) {
  return demangled.find("std::__cxx11::") != std::string_view::npos ||
         demangled.find("[abi:cxx11]") != std::string_view::npos;
}

std::string LastSourceName(std::string_view qualified) {
  // The last component: after the last "::" outside template arguments and parentheses.
  size_t start = 0;
  int angle = 0, paren = 0;
  for (size_t i = 0; i + 1 < qualified.size(); ++i) {
    const char c = qualified[i];
    if (c == '<') ++angle;
    if (c == '>' && angle > 0) --angle;
    if (c == '(') ++paren;
    if (c == ')' && paren > 0) --paren;
    if (c == ':' && qualified[i + 1] == ':' && angle == 0 && paren == 0) start = i + 2;
  }
  std::string_view last = qualified.substr(start);
  if (last.substr(0, 8) == "operator") return "";
  if (!last.empty() && last.front() == '~') last.remove_prefix(1);  // a destructor: its class's name
  size_t end = 0;
  while (end < last.size() && Identifier(last[end])) ++end;
  last = last.substr(0, end);
  if (last.empty() || (last.front() >= '0' && last.front() <= '9')) return "";
  return std::to_string(last.size()) + std::string(last);
}

void SourceNameCandidates(std::string_view mangled, std::vector<std::string_view>* out,
                          const std::vector<bool>* lengths) {
  out->clear();
  for (size_t i = 0; i < mangled.size(); ++i) {
    const char c = mangled[i];
    // Every digit but 0 may start one: a name may end in digits ("3c104cuda").
    if (c < '1' || c > '9') continue;
    size_t n = 0, j = i;
    while (j < mangled.size() && mangled[j] >= '0' && mangled[j] <= '9' && n < 100000)
      n = n * 10 + static_cast<size_t>(mangled[j++] - '0');
    if (n == 0 || n > mangled.size() - j) continue;
    if (lengths != nullptr && n < lengths->size() && !(*lengths)[n]) continue;
    out->push_back(mangled.substr(i, j - i + n));
  }
}

}  // namespace ldscope::elf
