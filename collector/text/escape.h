// File names, argv and environments are byte strings; the model and every output hold
// them as text that is lossless, readable and safe to print: Escape turns raw bytes
// into that text at the collector's read boundary, Unescape turns it back before a
// path goes to the OS.
#pragma once

#include <string>
#include <string_view>

namespace ldscope::text {

// Printable ASCII and valid, printable UTF-8 pass unchanged; `\` becomes `\\`;
// newline, tab, CR and ESC become `\n`, `\t`, `\r`, `\e`; every other C0 control, DEL,
// the C1 controls (U+0080-U+009F), the Unicode line/paragraph separators and bidi
// controls, and each byte of invalid or truncated UTF-8 becomes `\xNN` (lower-case
// hex). The result is valid UTF-8 without control characters.
std::string Escape(std::string_view raw);
// Escape would return raw unchanged (printable ASCII without `\`): callers can then
// use raw as is, without a copy.
bool PlainAscii(std::string_view raw);

// The exact inverse of Escape: Unescape(Escape(x)) == x for every byte string. In text
// that Escape did not produce, a backslash not starting one of its sequences stays.
std::string Unescape(std::string_view text);

// A shell word for the raw bytes behind an escaped text, that a POSIX shell turns back
// into exactly those bytes: bare when only safe characters, '...' when the bytes are
// printable, bash/POSIX-2024 $'...' when they need escapes.
std::string ShellQuote(std::string_view escaped);

// A Python str literal ('...') for the raw bytes behind an escaped text, that
// os.fsencode (UTF-8, surrogateescape: what ctypes.CDLL and open do with a str path)
// turns back into exactly those bytes; printable text stays as it is, a quote and a
// backslash are escaped, a control byte is \xNN, and a byte of invalid UTF-8 or of an
// unprintable code point is the surrogate \udcNN.
std::string PythonString(std::string_view escaped);

// GitHub Actions runs any log line that begins, after blanks, with "::" as a workflow
// command. In text that is not one of ldscope's own annotations, such a line's first
// ':' becomes `\x3a` (Unescape still gives the original text back).
std::string GuardLines(std::string text);

}  // namespace ldscope::text
