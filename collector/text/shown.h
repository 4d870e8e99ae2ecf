// Text for people made from byte strings. The model, the ELF facts and the loader hold
// file names, argv and environments as the bytes they are; a finding's words are text.
// Shown is that text, and the only way from bytes to it is an escape: Show formats its
// arguments as fmt::format does, but each string argument escaped (text::Escape) and
// each Shown as it is. Shown has no formatter of its own and no conversion to
// std::string but str(), so a byte string cannot reach a finding's words unescaped, nor
// text be escaped twice, without the compiler seeing it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "text/escape.h"

namespace ldscope::text {

class Shown {
 public:
  Shown() = default;
  // A literal in ldscope's source is its own escape (printable, no `\`: escape_test
  // checks the literals of the passes' words).
  template <size_t N>
  Shown(const char (&literal)[N]) : s_(literal) {}  // NOLINT: implicit on purpose

  // Text that is escaped already (made by Escape or one of ShellQuote, PythonString).
  static Shown Escaped(std::string text) {
    Shown s;
    s.s_ = std::move(text);
    return s;
  }

  const std::string& str() const& { return s_; }
  std::string str() && { return std::move(s_); }
  bool empty() const { return s_.empty(); }

  Shown& operator+=(const Shown& more) {
    s_ += more.s_;
    return *this;
  }
  friend Shown operator+(Shown a, const Shown& b) { return a += b; }

 private:
  std::string s_;
};

// One byte string as text.
inline Shown ShowBytes(std::string_view raw) { return Shown::Escaped(Escape(raw)); }

// The same appended to a renderer's text (its fast path: printable ASCII as it is).
inline void AppendBytes(std::string& out, std::string_view raw) {
  if (PlainAscii(raw))
    out += raw;
  else
    out += Escape(raw);
}

namespace show_detail {
inline const std::string& Arg(const Shown& s) { return s.str(); }
template <class T,
          std::enable_if_t<std::is_convertible_v<const T&, std::string_view> && !std::is_same_v<std::decay_t<T>, Shown>,
                           int> = 0>
std::string Arg(const T& raw) {
  return Escape(std::string_view(raw));
}
template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
T Arg(T x) {
  return x;
}
// fmt::join of byte strings (or of Shown, or numbers): each item as Arg shows it.
template <class It, class Sentinel>
std::string Arg(const fmt::join_view<It, Sentinel, char>& j) {
  std::string out;
  for (auto it = j.begin; it != j.end; ++it) {
    if (it != j.begin) out.append(j.sep.data(), j.sep.size());
    out += fmt::format("{}", Arg(*it));
  }
  return out;
}
template <class T>
using ArgT = decltype(Arg(std::declval<T>()));
}  // namespace show_detail

// A shell word that a POSIX shell turns back into exactly the bytes raw: bare when only
// safe characters, '...' when the bytes are printable, bash/POSIX-2024 $'...' when they
// need escapes.
Shown ShellQuote(std::string_view raw);

// A Python str literal ('...') that os.fsencode (UTF-8, surrogateescape: what
// ctypes.CDLL and open do with a str path) turns back into exactly the bytes raw;
// printable text stays as it is, a quote and a backslash are escaped, a control byte is
// \xNN, and a byte of invalid UTF-8 or of an unprintable code point is the surrogate
// \udcNN.
Shown PythonString(std::string_view raw);

// fmt::format, with each string argument escaped and each Shown as it is.
template <class A0, class... A>
Shown Show(fmt::format_string<show_detail::ArgT<A0>, show_detail::ArgT<A>...> f, A0&& a0, A&&... a) {
  return Shown::Escaped(
      fmt::format(f, show_detail::Arg(std::forward<A0>(a0)), show_detail::Arg(std::forward<A>(a))...));
}

}  // namespace ldscope::text
