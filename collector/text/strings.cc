// See strings.h.
#include "text/strings.h"

namespace ldscope::text {

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '\0');
  char* d = out.data();
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    *d++ = kDigits[b >> 4];
    *d++ = kDigits[b & 0xf];
  }
  return out;
}

std::string BaseName(std::string_view path) {
  const auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string DamageText(std::string_view file, uint64_t offset, std::string_view message) {
  if (file.empty()) return std::string(message);
  std::string out(file);
  out += ": at byte offset ";
  out += std::to_string(offset);
  out += ": ";
  out += message;
  return out;
}

}  // namespace ldscope::text
