// Helpers shared by the sub-commands: finding the audit library, complaining.
#include <unistd.h>

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"

namespace ldscope::cli {

void Complain(const std::string& message) {
  std::fprintf(stderr, "ldscope: %s\n", message.c_str());
}

std::string FindAuditLibrary(std::string* error) {
  static const char kName[] = "libldscope_audit.so";
  if (const char* env = std::getenv("LDSCOPE_AUDIT_LIB"); env != nullptr && *env != '\0') {
    if (access(env, R_OK) == 0) return env;
    *error = fmt::format("LDSCOPE_AUDIT_LIB={} is not readable", env);
    return "";
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    *error = "cannot read /proc/self/exe to find the audit library";
    return "";
  }
  self[n] = '\0';
  std::string dir(self);
  dir.erase(dir.rfind('/'));
  // Build tree: next to the binary. Installed: <prefix>/bin/../<libdir>/ldscope/.
  const std::string candidates[] = {
      dir + "/" + kName,
      dir + "/../" LDSCOPE_AUDIT_INSTALL_DIR "/" + kName,
      dir + "/../lib/ldscope/" + kName,
  };
  for (const auto& c : candidates) {
    if (access(c.c_str(), R_OK) != 0) continue;
    char real[4096];
    if (realpath(c.c_str(), real) != nullptr) return real;
    return c;
  }
  *error = fmt::format("cannot find {} next to {} or in {}/../{}; set LDSCOPE_AUDIT_LIB",
                       kName, self, dir, LDSCOPE_AUDIT_INSTALL_DIR);
  return "";
}

}  // namespace ldscope::cli
