// Helpers shared by the sub-commands: finding the audit library, complaining.
#include <ctime>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "redact.h"
#include "store/output_file.h"
#include "store/trace_file.h"
#include "text/escape.h"
#include "text/strings.h"

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

void ComplainDamage(const std::string& file, uint64_t offset, const std::string& message,
                    const char* analysing) {
  if (file.empty() || offset == 0)
    Complain(file.empty() ? message : file + ": " + message);
  else
    Complain(fmt::format("{} ({} what precedes it)", text::DamageText(file, offset, message), analysing));
}

int NoTrace() {
  Complain("no trace could be read");
  return kUsage;
}

bool RefuseTooLarge(const std::vector<std::string>& paths) {
  const std::optional<std::string> too_large = store::TooLarge(paths);
  if (too_large) Complain(*too_large);
  return too_large.has_value();
}

Result<std::string> SelfExe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Error{"cannot read /proc/self/exe to find ldscope's own files"};
  return std::string(self, static_cast<size_t>(n));
}

std::string DefaultTraceName(const std::string& prefix) {
  const time_t now = time(nullptr);
  tm t{};
  localtime_r(&now, &t);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &t);
  return fmt::format("{}-{}-{}.ldscope", prefix, stamp, getpid());
}

std::string TempRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

Result<std::string> MakePrivateDir(const std::string& parent, const std::string& prefix) {
  std::string dir = parent + "/" + prefix + "-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr)  // mkdtemp makes it 0700
    return Error{fmt::format("cannot create a private directory {}: {}", dir, std::strerror(errno))};
  return dir;
}

namespace {

// The directory of the running ldscope binary.
Result<std::string> SelfDir() {
  Result<std::string> self = SelfExe();
  if (self.ok()) self->erase(self->rfind('/'));
  return self;
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

Result<std::string> FindAuditLibrary() {
  static const char kName[] = "libldscope_audit.so";
  if (const char* env = std::getenv("LDSCOPE_AUDIT_LIB"); env != nullptr && *env != '\0') {
    if (access(env, R_OK) == 0) return std::string(env);
    return Error{fmt::format("LDSCOPE_AUDIT_LIB={} is not readable", env)};
  }
  const Result<std::string> self = SelfDir();
  if (!self.ok()) return self;
  const std::string& dir = *self;
  // Build tree: next to the binary. Installed: <prefix>/bin/../<libdir>/ldscope/.
  const std::string found = FirstReadable({dir + "/" + kName,
                                           dir + "/../" LDSCOPE_AUDIT_INSTALL_DIR "/" + kName,
                                           dir + "/../lib/ldscope/" + kName});
  if (found.empty())
    return Error{fmt::format("cannot find {} next to {} or in {}/../{}; set LDSCOPE_AUDIT_LIB",
                             kName, dir, dir, LDSCOPE_AUDIT_INSTALL_DIR)};
  return found;
}

Result<std::string> FindPythonHook() {
  const Result<std::string> self = SelfDir();
  if (!self.ok()) return self;
  const std::string& dir = *self;
  // Build tree: bin/python/. Installed: <prefix>/share/ldscope/python/.
  std::string found = FirstReadable({dir + "/python/sitecustomize.py",
                                     dir + "/../" LDSCOPE_PYTHON_INSTALL_DIR "/sitecustomize.py"});
  if (found.empty())
    return Error{fmt::format("cannot find the Python hook (sitecustomize.py) in {}/python or "
                             "{}/../{}", dir, dir, LDSCOPE_PYTHON_INSTALL_DIR)};
  return found.erase(found.rfind('/'));
}

}  // namespace ldscope::cli

namespace ldscope::cli {

std::vector<std::string> RedactArgv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  bool next = false;
  for (const auto& a : argv) {
    const redact::Verdict v = redact::Judge(a.data(), a.size());
    if (next)
      out.push_back(redact::kRedacted);
    else if (v.value)
      out.push_back(a.substr(0, v.keep) + redact::kRedacted);
    else
      out.push_back(a);
    next = v.next;
  }
  return out;
}

}  // namespace ldscope::cli

namespace ldscope::cli {
namespace {

std::string g_spool_dir;

void RemoveSpool() {
  if (g_spool_dir.empty()) return;
  unlink((g_spool_dir + "/standard-input.ldscope").c_str());
  rmdir(g_spool_dir.c_str());
}

}  // namespace

Status ReadStandardInputAsFile(const std::vector<std::string*>& inputs) {
  bool wanted = false;
  for (const auto* p : inputs) wanted |= *p == "-";
  if (!wanted) return Status::Ok();
  if (isatty(0)) return Error{"-: standard input is a terminal; pipe a trace into it"};
  Result<std::string> dir = MakePrivateDir(TempRoot(), "ldscope-stdin");
  if (!dir.ok()) return dir.status();
  g_spool_dir = *dir;
  std::atexit(RemoveSpool);
  const std::string file = *dir + "/standard-input.ldscope";
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Error{fmt::format("-: cannot keep standard input in {}: {}", file, std::strerror(errno))};
  char buf[1 << 16];
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return Error{fmt::format("-: reading standard input: {}", std::strerror(err))};
    }
    if (n == 0) break;
    // No more than a reader takes is kept (store::kMaxTraceBytes).
    total += static_cast<uint64_t>(n);
    if (total > store::kMaxTraceBytes) {
      close(fd);
      return Error{fmt::format("too large: standard input holds more than {} bytes, and ldscope reads at most "
                               "{} bytes ({} GiB) of trace at once",
                               store::kMaxTraceBytes, store::kMaxTraceBytes, store::kMaxTraceBytes >> 30)};
    }
    if (const int err = store::WriteAll(fd, buf, static_cast<size_t>(n)); err != 0) {
      close(fd);
      return Error{fmt::format("-: cannot keep standard input in {}: {}", file, std::strerror(err))};
    }
  }
  close(fd);
  for (auto* p : inputs)
    if (*p == "-") *p = file;
  return Status::Ok();
}

}  // namespace ldscope::cli
