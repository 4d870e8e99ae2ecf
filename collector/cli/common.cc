// Helpers shared by the sub-commands: finding the audit library, complaining.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "store/output_file.h"
#include "text/escape.h"

namespace ldscope::cli {

// Names in messages are escaped text already (or escaped by the caller); this is the
// net under them: no control character but the message's own line breaks, and no
// line a CI runner would take for a workflow command.
void Complain(const std::string& message) {
  std::string safe;
  for (char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n') || u == 0x7f)
      safe += fmt::format("\\x{:02x}", u);
    else
      safe += c;
  }
  std::fprintf(stderr, "ldscope: %s\n", text::GuardLines(std::move(safe)).c_str());
}

bool Print(std::FILE* out, const std::string& text) {
  std::fflush(out);
  const int err = store::WriteAll(fileno(out), text.data(), text.size());
  if (err == 0) return true;
  Complain(fmt::format("writing to {} failed: {}", out == stderr ? "standard error" : "standard output",
                       std::strerror(err)));
  return false;
}

std::string RefuseOverwrite(const std::string& output, const std::vector<std::string>& inputs) {
  if (output.empty()) return "";
  for (const auto& in : inputs)
    if (store::SameFile(output, in))
      return fmt::format("the output {} is the input {}: refusing to overwrite it", output, in);
  return "";
}

int NoTrace() {
  Complain("no trace could be read");
  return kUsage;
}

namespace {

// The directory of the running ldscope binary, or "" (and *error).
std::string SelfDir(std::string* error) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    *error = "cannot read /proc/self/exe to find ldscope's own files";
    return "";
  }
  self[n] = '\0';
  std::string dir(self);
  dir.erase(dir.rfind('/'));
  return dir;
}

// The first readable candidate, resolved to a real path.
std::string FirstReadable(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates) {
    if (access(c.c_str(), R_OK) != 0) continue;
    char real[4096];
    if (realpath(c.c_str(), real) != nullptr) return real;
    return c;
  }
  return "";
}

}  // namespace

std::string FindAuditLibrary(std::string* error) {
  static const char kName[] = "libldscope_audit.so";
  if (const char* env = std::getenv("LDSCOPE_AUDIT_LIB"); env != nullptr && *env != '\0') {
    if (access(env, R_OK) == 0) return env;
    *error = fmt::format("LDSCOPE_AUDIT_LIB={} is not readable", env);
    return "";
  }
  const std::string dir = SelfDir(error);
  if (dir.empty()) return "";
  // Build tree: next to the binary. Installed: <prefix>/bin/../<libdir>/ldscope/.
  const std::string found = FirstReadable({dir + "/" + kName,
                                           dir + "/../" LDSCOPE_AUDIT_INSTALL_DIR "/" + kName,
                                           dir + "/../lib/ldscope/" + kName});
  if (found.empty())
    *error = fmt::format("cannot find {} next to {} or in {}/../{}; set LDSCOPE_AUDIT_LIB",
                         kName, dir, dir, LDSCOPE_AUDIT_INSTALL_DIR);
  return found;
}

std::string FindPythonHook(std::string* error) {
  const std::string dir = SelfDir(error);
  if (dir.empty()) return "";
  // Build tree: bin/python/. Installed: <prefix>/share/ldscope/python/.
  std::string found = FirstReadable({dir + "/python/sitecustomize.py",
                                     dir + "/../" LDSCOPE_PYTHON_INSTALL_DIR "/sitecustomize.py"});
  if (found.empty()) {
    *error = fmt::format("cannot find the Python hook (sitecustomize.py) in {}/python or "
                         "{}/../{}", dir, dir, LDSCOPE_PYTHON_INSTALL_DIR);
    return "";
  }
  return found.erase(found.rfind('/'));
}

}  // namespace ldscope::cli
