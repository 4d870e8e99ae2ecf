// The byte-string convention (collector/text/escape.h): Escape is lossless, its output
// is printable valid UTF-8, ShellQuote gives a shell the original bytes back, and
// GuardLines leaves no line a CI runner would run as a workflow command.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "text/escape.h"
#include "text/shown.h"
#include "text/strings.h"

namespace ldscope {
namespace {

using text::Escape;
using text::PlainAscii;
using text::Unescape;

// An independent check of what Escape promises about its output: valid UTF-8 (shortest
// form, no surrogates), no C0, DEL or C1 control, no line separator or bidi control.
bool PrintableUtf8(const std::string& s, std::string* why) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f) return *why = "control at " + std::to_string(i), false;
      ++i;
      continue;
    }
    const size_t n = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return *why = "bad lead at " + std::to_string(i), false;
    uint32_t cp = b & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xc0) != 0x80) return *why = "bad continuation at " + std::to_string(i), false;
      cp = cp << 6 | (c & 0x3f);
    }
    const uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return *why = "invalid code point at " + std::to_string(i), false;
    if (cp <= 0x9f || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069))
      return *why = "unprintable code point at " + std::to_string(i), false;
    i += n;
  }
  return true;
}

// Random byte strings biased toward what breaks decoders: lead bytes without their
// continuations, continuations alone, controls, backslashes, valid multi-byte chars.
std::string RandomBytes(std::mt19937& rng, size_t max_len) {
  static const std::vector<std::string> pieces = {
      "a", "/", "\\", "\\x41", "\n", "\r", "\t", "\x1b", "\x7f", "\xff", "\xc3", "\xa9",
      "\xc3\xa9", "\xe2\x82\xac", "\xe2\x82", "\xf0\x9f\x98\x80", "\xf0\x9f", "\xed\xa0\x80",
      "\xc0\xaf", "\xc2\x85", "\xe2\x80\xae", "'", "$", "::", " ", "\x01"};
  std::uniform_int_distribution<size_t> len(0, max_len), pick(0, pieces.size()), byte(1, 255);
  std::string s;
  for (size_t i = len(rng); i > 0; --i) {
    const size_t p = pick(rng);
    s += p == pieces.size() ? std::string(1, static_cast<char>(byte(rng))) : pieces[p];
  }
  return s;
}

TEST(Escape, Examples) {
  EXPECT_EQ(Escape("/usr/lib/libc.so.6"), "/usr/lib/libc.so.6");
  EXPECT_EQ(Escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(Escape("a\\b"), "a\\\\b");
  EXPECT_EQ(Escape("\n\t\r\x1b\x01\x7f"), "\\n\\t\\r\\e\\x01\\x7f");
  EXPECT_EQ(Escape(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Escape("bad\xff"), "bad\\xff");
  EXPECT_EQ(Escape("cut\xc3"), "cut\\xc3");                  // a multi-byte char cut short
  EXPECT_EQ(Escape("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(Escape("\xc2\x85"), "\\xc2\\x85");               // U+0085, a C1 control
  EXPECT_EQ(Escape("\xe2\x80\xae"), "\\xe2\\x80\\xae");     // U+202E, right-to-left override
  EXPECT_EQ(Escape("\xed\xa0\x80"), "\\xed\\xa0\\x80");     // a surrogate
  EXPECT_EQ(Escape("\xc0\xaf"), "\\xc0\\xaf");               // overlong '/'
  EXPECT_EQ(Escape("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(Escape("c\n::error::injected"), "c\\n::error::injected");
}

TEST(Escape, UnescapeExamples) {
  EXPECT_EQ(Unescape("bad\\xff"), "bad\xff");
  EXPECT_EQ(Unescape("\\\\x41"), "\\x41");
  EXPECT_EQ(Unescape("\\e[31m\\r"), "\x1b[31m\r");
  EXPECT_EQ(Unescape("\\q \\x4 \\"), "\\q \\x4 \\");  // not Escape's: kept as is
}

// Every string of one and two bytes, exhaustively.
TEST(Escape, AllShortStringsRoundTrip) {
  std::string why;
  for (int a = 0; a < 256; ++a) {
    for (int b = -1; b < 256; ++b) {
      std::string s(1, static_cast<char>(a));
      if (b >= 0) s += static_cast<char>(b);
      const std::string e = Escape(s);
      ASSERT_EQ(Unescape(e), s) << e;
      ASSERT_TRUE(PrintableUtf8(e, &why)) << e << ": " << why;
      // The trace reader leaves a plain string as it is: it must be its own escape.
      // (Eight bytes and more take PlainAscii's word-at-a-time path.)
      for (const std::string& t : {s, s + std::string(7, 'a'), std::string(9, 'b') + s}) {
        if (PlainAscii(t)) {
          ASSERT_EQ(Escape(t), t);
        }
      }
    }
  }
}

TEST(Escape, HexIsTwoLowerDigitsAByte) {
  EXPECT_EQ(text::Hex(std::string("\x00\x01\x7f\x80\xab\xff", 6)), "00017f80abff");
  EXPECT_EQ(text::Hex(""), "");
}

TEST(Escape, RandomBytesRoundTrip) {
  std::mt19937 rng(9);
  std::string why;
  for (int i = 0; i < 200000; ++i) {
    const std::string s = RandomBytes(rng, 12);
    const std::string e = Escape(s);
    ASSERT_EQ(Unescape(e), s) << e;
    ASSERT_TRUE(PrintableUtf8(e, &why)) << e << ": " << why;
    ASSERT_EQ(Escape(Unescape(e)), e);
    // Joining at an ASCII separator commutes with escaping (the search model joins
    // escaped directories and names).
    const std::string t = RandomBytes(rng, 6);
    ASSERT_EQ(Escape(s + "/" + t), e + "/" + Escape(t));
    // Escaping twice is lossless too.
    ASSERT_EQ(Unescape(Unescape(Escape(e))), s);
  }
}

// words and 300 random byte strings of up to 10 bytes, without NUL (argv and paths
// cannot hold one).
std::vector<std::string> WithRandomWords(std::vector<std::string> words, unsigned seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 300; ++i) {
    std::string w = RandomBytes(rng, 10);
    w.erase(std::remove(w.begin(), w.end(), '\0'), w.end());
    words.push_back(w);
  }
  return words;
}

std::string NulTerminated(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += w + std::string(1, '\0');
  return out;
}

// The shell reads ShellQuote's words back as the original bytes.
TEST(Escape, ShellQuoteRoundTripsThroughBash) {
  const std::vector<std::string> words = WithRandomWords(
      {"", "plain", "it's", "a b", "$HOME", "bad\xff", "\x1b[1m", "back\\slash", "x\\xff", "\xe2\x80\xae", "*"}, 7);
  std::string script = "printf '%s\\0'";
  for (const auto& w : words) script += " " + text::ShellQuote(w).str();
  std::string why;
  EXPECT_TRUE(PrintableUtf8(script, &why)) << why;
  const auto r = testing::RunCmd({"/bin/bash", "-c", script});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, NulTerminated(words));
  EXPECT_EQ(text::ShellQuote("plain/path-1.2").str(), "plain/path-1.2");
  EXPECT_EQ(text::ShellQuote("it's").str(), "'it'\\''s'");
  EXPECT_EQ(text::ShellQuote("bad\xff'").str(), "$'bad\\xff\\''");
}

// Python reads PythonString's literals back, through os.fsencode, as the original bytes.
TEST(Escape, PythonStringRoundTripsThroughPython) {
  const std::vector<std::string> words =
      WithRandomWords({"", "plain", "it's", "a b", "bad\xff", "\x1b[1m", "back\\slash", "x\\xff", "\xe2\x80\xae",
                       "\xc2\x85", "caf\xc3\xa9", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\x7f\"q\""},
                      11);
  std::string script = "import os, sys; sys.stdout.buffer.write(b''.join(os.fsencode(x) + b'\\0' for x in [";
  for (const auto& w : words) script += text::PythonString(w).str() + ", ";
  script += "]))";
  std::string why;
  EXPECT_TRUE(PrintableUtf8(script, &why)) << why;
  const auto r = testing::RunCmd({"/usr/bin/python3", "-c", script});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, NulTerminated(words));
  EXPECT_EQ(text::PythonString("/opt/lib/libx.so.1").str(), "'/opt/lib/libx.so.1'");
  EXPECT_EQ(text::PythonString("it's").str(), "'it\\'s'");
  EXPECT_EQ(text::PythonString("bad\xff").str(), "'bad\\udcff'");
}

// Show escapes every byte string it is given, and puts text (Shown) in as it is: a byte
// string reaches a finding's words escaped once, never twice.
TEST(Escape, ShowEscapesBytesOnceAndKeepsText) {
  const std::string raw = "dir\n\xff\\x";
  EXPECT_EQ(text::ShowBytes(raw).str(), "dir\\n\\xff\\\\x");
  EXPECT_EQ(text::Show("{} at {}", raw, 3).str(), "dir\\n\\xff\\\\x at 3");
  const text::Shown quoted = text::ShellQuote(raw);
  EXPECT_EQ(text::Show("run {}", quoted).str(), "run " + quoted.str());
  const std::vector<std::string> list = {"a\tb", "c"};
  EXPECT_EQ(text::Show("[{}]", fmt::join(list, ", ")).str(), "[a\\tb, c]");
  const text::Shown literal = "a literal";
  EXPECT_EQ((literal + text::ShowBytes(raw)).str(), "a literal" + text::Escape(raw));
}

TEST(Escape, GuardLines) {
  const std::string in =
      "ok\n::error::x\n  ::warning::y\n\t::z\n\xc2\xa0::nbsp\na ::fine\n::";
  const std::string out = text::GuardLines(in);
  EXPECT_EQ(out,
            "ok\n\\x3a:error::x\n  \\x3a:warning::y\n\t\\x3a:z\n\xc2\xa0\\x3a:nbsp\na ::fine\n\\x3a:");
  EXPECT_EQ(Unescape(out), in);
}

}  // namespace
}  // namespace ldscope
