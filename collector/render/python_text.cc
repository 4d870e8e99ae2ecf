// See python_text.h.
#include "render/python_text.h"

#include <fmt/format.h>

namespace ldscope::render {
namespace {

std::string ShortFile(const std::string& file, const std::string& cwd) {
  for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
    const auto at = file.rfind(marker);
    if (at != std::string::npos) return file.substr(at + std::string(marker).size());
  }
  if (!cwd.empty() && cwd != "/" && file.size() > cwd.size() + 1 &&
      file.compare(0, cwd.size(), cwd) == 0 && file[cwd.size()] == '/')
    return file.substr(cwd.size() + 1);
  return file;
}

}  // namespace

std::string PyFrameText(const v1::SourceLine& f, const std::string& cwd) {
  if (f.file().empty()) return "(unknown line)";
  return fmt::format("{}:{}", ShortFile(f.file(), cwd), f.line());
}

std::string PyCauseText(const v1::PyCause& c, const std::string& cwd) {
  if (c.by_hook()) return "ldscope's Python hook (its own import of _socket)";
  std::string s;
  if (!c.dlopen_call().empty()) {
    s = fmt::format("{} at {}", c.dlopen_call(), PyFrameText(c.call_site(), cwd));
    if (c.top_module().empty()) return s;
    if (c.import_module() != c.top_module())
      s += fmt::format(", in import {} ({})", c.import_module(), PyFrameText(c.import_site(), cwd));
    return s + fmt::format(", during import {} at {}", c.top_module(),
                           PyFrameText(c.top_site(), cwd));
  }
  if (c.import_module().empty()) return "";
  s = fmt::format("import {} at {}", c.import_module(), PyFrameText(c.import_site(), cwd));
  if (c.import_module() != c.top_module())
    s += fmt::format(", during import {} at {}", c.top_module(), PyFrameText(c.top_site(), cwd));
  return s;
}

}  // namespace ldscope::render
