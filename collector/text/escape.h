// File names, argv and environments are byte strings, and the model holds them so;
// every output holds them as text that is lossless, readable and safe to print: Escape
// turns bytes into that text where it is written (text/shown.h), Unescape turns text a
// person or a report wrote back into the bytes.
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

// GitHub Actions runs any log line that begins, after blanks, with "::" as a workflow
// command. In text that is not one of ldscope's own annotations, such a line's first
// ':' becomes `\x3a` (Unescape still gives the original text back).
std::string GuardLines(std::string text);

}  // namespace ldscope::text
