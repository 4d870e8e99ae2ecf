// See escape.h.
#include "text/escape.h"
#include "text/shown.h"

#include <cstring>

#include <cstdint>

namespace ldscope::text {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void PutHexByte(std::string& out, uint8_t b) {
  out += "\\x";
  out += kHex[b >> 4];
  out += kHex[b & 0xf];
}

bool Cont(uint8_t b) { return (b & 0xc0) == 0x80; }

// Length of the valid UTF-8 sequence of two to four bytes at s[i] (shortest form, no
// surrogates, at most U+10FFFF), and its code point; 0 when invalid or cut short.
size_t Utf8At(std::string_view s, size_t i, uint32_t* cp) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t b0 = at(0);
  const size_t left = s.size() - i;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    if (left < 2 || !Cont(at(1))) return 0;
    *cp = (b0 & 0x1fu) << 6 | (at(1) & 0x3fu);
    return 2;
  }
  if (b0 >= 0xe0 && b0 <= 0xef) {
    if (left < 3 || !Cont(at(1)) || !Cont(at(2))) return 0;
    if ((b0 == 0xe0 && at(1) < 0xa0) || (b0 == 0xed && at(1) > 0x9f)) return 0;
    *cp = (b0 & 0x0fu) << 12 | (at(1) & 0x3fu) << 6 | (at(2) & 0x3fu);
    return 3;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    if (left < 4 || !Cont(at(1)) || !Cont(at(2)) || !Cont(at(3))) return 0;
    if ((b0 == 0xf0 && at(1) < 0x90) || (b0 == 0xf4 && at(1) > 0x8f)) return 0;
    *cp = (b0 & 0x07u) << 18 | (at(1) & 0x3fu) << 12 | (at(2) & 0x3fu) << 6 | (at(3) & 0x3fu);
    return 4;
  }
  return 0;
}

// Code points that are valid but must not reach a terminal or log as such: the C1
// controls, and those that break or reorder lines (U+2028/9, bidi embeddings,
// overrides and isolates).
bool Unprintable(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Length of the blank at s[i] that the runner trims before looking for "::" (.NET's
// TrimStart: ASCII blanks and the Unicode space separators), 0 when none.
size_t BlankAt(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const auto c = static_cast<uint8_t>(s[i]);
  if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
  uint32_t cp = 0;
  const size_t n = c >= 0x80 ? Utf8At(s, i, &cp) : 0;
  const bool blank = cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
                     cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
  return n != 0 && blank ? n : 0;
}

}  // namespace

bool PlainAscii(std::string_view raw) {
  // Eight bytes at a time (symbol names run to hundreds of bytes): a byte fails when its
  // high bit is set, when its low seven bits are 0x7f (DEL), below 0x20, or when it is
  // a backslash. No test carries into the next byte.
  constexpr uint64_t k01 = 0x0101010101010101ull, k7f = 0x7f7f7f7f7f7f7f7full, k80 = ~k7f;
  size_t i = 0;
  for (; i + 8 <= raw.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, raw.data() + i, 8);
    const uint64_t low = w & k7f;
    const uint64_t del = low + k01;                  // 0x80 where the low bits are 0x7f
    const uint64_t ctl = ~(low + 0x60 * k01);        // 0x80 where they are below 0x20
    const uint64_t x = w ^ (0x5c * k01);             // zero where a backslash is
    const uint64_t bs = ~(((x & k7f) + k7f) | x);    // 0x80 where x is zero
    if (((w | del | ctl | bs) & k80) != 0) return false;
  }
  for (; i < raw.size(); ++i) {
    const auto c = static_cast<uint8_t>(raw[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\') return false;
  }
  return true;
}

std::string Escape(std::string_view raw) {
  if (PlainAscii(raw)) return std::string(raw);  // the common case, paths and names
  std::string out;
  out.reserve(raw.size() + 8);
  for (size_t i = 0; i < raw.size();) {
    const auto c = static_cast<uint8_t>(raw[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (c == '\\') out += '\\';
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        case 0x1b: out += "\\e"; break;
        default: PutHexByte(out, c);
      }
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = Utf8At(raw, i, &cp);
    if (n == 0) {
      PutHexByte(out, c);
      ++i;
    } else if (Unprintable(cp)) {
      for (size_t k = 0; k < n; ++k) PutHexByte(out, static_cast<uint8_t>(raw[i + k]));
      i += n;
    } else {
      out.append(raw.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string Unescape(std::string_view text) {
  if (text.find('\\') == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char e = text[i + 1];
    const char* simple = e == '\\' ? "\\" : e == 'n' ? "\n" : e == 't' ? "\t" : e == 'r' ? "\r"
                         : e == 'e' ? "\x1b" : nullptr;
    if (simple != nullptr) {
      out += *simple;
      ++i;
    } else if (e == 'x' && i + 3 < text.size() && HexValue(text[i + 2]) >= 0 &&
               HexValue(text[i + 3]) >= 0) {
      out += static_cast<char>(HexValue(text[i + 2]) << 4 | HexValue(text[i + 3]));
      i += 3;
    } else {
      out += '\\';  // not a sequence Escape writes: keep it
    }
  }
  return out;
}

namespace {

std::string ShellWord(std::string_view raw) {
  bool safe = !raw.empty();
  for (char c : raw)
    safe &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  if (safe) return std::string(raw);
  const std::string text = Escape(raw);
  bool printable = true;  // Escape changed nothing but backslashes
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') continue;
    printable &= text[i + 1] == '\\';
    ++i;
  }
  std::string out;
  if (printable) {
    out = "'";
    for (char c : raw) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }
  // In $'...' the shell reads \\ \n \t \r \e \xNN as Escape writes them; only ' needs one.
  out = "$'";
  for (char c : text) out += c == '\'' ? std::string("\\'") : std::string(1, c);
  return out + "'";
}

std::string PythonLiteral(std::string_view raw) {
  std::string out = "'";
  for (size_t i = 0; i < raw.size();) {
    const auto b = static_cast<uint8_t>(raw[i]);
    if (b < 0x80) {
      if (b == '\'' || b == '\\') out += '\\';
      if (b < 0x20 || b == 0x7f)
        PutHexByte(out, b);
      else
        out += static_cast<char>(b);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = Utf8At(raw, i, &cp);
    if (n > 0 && !Unprintable(cp)) {
      out.append(raw.substr(i, n));
      i += n;
      continue;
    }
    for (size_t k = 0; k < (n > 0 ? n : 1); ++k) {
      const auto x = static_cast<uint8_t>(raw[i + k]);
      out += "\\udc";
      out += kHex[x >> 4];
      out += kHex[x & 0xf];
    }
    i += n > 0 ? n : 1;
  }
  return out + "'";
}

}  // namespace

Shown ShellQuote(std::string_view raw) { return Shown::Escaped(ShellWord(raw)); }

Shown PythonString(std::string_view raw) { return Shown::Escaped(PythonLiteral(raw)); }

std::string GuardLines(std::string text) {
  for (size_t line = 0; line < text.size();) {
    size_t i = line;
    while (size_t n = BlankAt(text, i)) i += n;
    if (text.compare(i, 2, "::") == 0) text.replace(i, 1, "\\x3a");
    const size_t nl = text.find('\n', i);
    if (nl == std::string::npos) break;
    line = nl + 1;
  }
  return text;
}

}  // namespace ldscope::text
