// `ldscope hook install` / `uninstall`: one .pth file in a Python environment's
// site-packages that explains a loader error at the moment it ends the program.
//
// site.py executes the `import` lines of every .pth file in site-packages at start-up.
// The one line written here wraps sys.excepthook and does nothing else until an
// exception ends the program; then the wrapper calls the hook it replaced (the
// traceback, as it would have been) and runs ldscope's _ldscope_failure.py from this
// binary's install, which prints a snapshot's report when the exception is a loader
// error (python/_ldscope_failure.py says what it does). Nothing else is written: no
// module, no bytecode; uninstall removes the one file, and only when its first line says
// install wrote it.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "store/output_file.h"
#include "text/escape.h"

namespace ldscope::cli {
namespace {

constexpr char kFileName[] = "ldscope-hook.pth";
constexpr char kMarker[] = "# ldscope hook: written by `ldscope hook install`, removed by `ldscope hook uninstall`.";

// A Python bytes literal holding s exactly (a path may hold any byte but NUL).
std::string PyBytes(const std::string& s) {
  std::string out = "b'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u == '\\' || u == '\'')
      out += std::string("\\") + c;
    else if (u >= 0x20 && u < 0x7f)
      out += c;
    else
      out += fmt::format("\\x{:02x}", u);
  }
  return out + "'";
}

// Runs argv (execvp: a name without a slash is found on PATH) and returns its standard
// output; an error when it cannot start or exits with a status other than 0.
Result<std::string> Output(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Error{fmt::format("pipe: {}", std::strerror(errno))};
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Error{fmt::format("fork: {}", std::strerror(errno))};
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      if (out.size() < (1u << 20)) out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return Error{fmt::format("cannot run {}", text::Escape(argv[0]))};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error{fmt::format("{} failed (status {})", text::Escape(argv[0]),
                             WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))};
  return out;
}

// The site-packages directory the hook goes into: --target, else the one of --python
// (its purelib: a venv's or conda env's own site-packages), or its user site with --user.
Result<std::string> SiteDir(const HookOptions& opt) {
  std::string dir = opt.target;
  if (dir.empty()) {
    const char* code = opt.user ? "import site; print(site.getusersitepackages())"
                                : "import sysconfig; print(sysconfig.get_paths()['purelib'])";
    // -I: neither the environment's PYTHON* variables nor the user's site change where.
    Result<std::string> out = Output({opt.python, "-I", "-c", code});
    if (!out.ok()) return Error{"cannot ask Python for its site-packages: " + out.error()};
    dir = *out;
    while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
    if (dir.empty() || dir.front() != '/')
      return Error{fmt::format("{} named no site-packages directory", text::Escape(opt.python))};
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error{fmt::format("{} is not a directory{}", text::Escape(dir),
                             opt.user ? " (Python reads a user site only where it exists: create it first)" : "")};
  return dir;
}

// The file's text, or nullopt when it does not exist; an error when it cannot be read.
Result<std::optional<std::string>> ReadIfThere(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Error{fmt::format("{}: {}", text::Escape(path), std::strerror(errno))};
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 && text.size() < (1u << 20)) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return std::optional<std::string>(std::move(text));
}

bool Ours(const std::string& text) { return text.rfind(std::string(kMarker) + "\n", 0) == 0; }

// The .pth file's text: comments saying what it is, and the one line site.py executes.
// The wrapper's body is compiled at every start-up, so it is kept to what must happen
// then; everything else is in _ldscope_failure.py, read only after a failure. site.py
// may read one site-packages twice (a venv's lib64 is a link to its lib): the line wraps
// an excepthook of its own only once, and the second time compiles nothing more.
std::string PthText(const std::string& binary, const std::string& failure) {
  return std::string(kMarker) +
         "\n"
         "# When an ImportError or OSError with a loader message (undefined symbol, cannot open shared\n"
         "# object file, ...) ends the program, it prints what `ldscope snapshot` finds in the process\n"
         "# under the traceback. Until then it only wraps sys.excepthook.\n"
         "import sys; getattr(sys.excepthook, '__name__', '') == '_ldscope_excepthook' or "
         "exec(\"def _ldscope_excepthook(t, v, tb, prev=sys.excepthook):\\n"
         " prev(t, v, tb)\\n"
         " try:\\n"
         "  ns = {'__name__': '_ldscope_failure', '__file__': F}\\n"
         "  with open(F, 'rb') as f:\\n"
         "   exec(compile(f.read(), F, 'exec'), ns)\\n"
         "  ns['explain'](v, B)\\n"
         " except Exception:\\n"
         "  pass\\n"
         "sys.excepthook = _ldscope_excepthook\\n\", {'sys': sys, 'F': " +
         PyBytes(failure) + ", 'B': " + PyBytes(binary) + "})\n";
}

int Install(const HookOptions& opt, const std::string& dir) {
  const Result<std::string> self = SelfExe();
  const Result<std::string> python_dir = FindPythonHook();
  if (!self.ok() || !python_dir.ok()) {
    Complain("hook: " + (!self.ok() ? self.error() : python_dir.error()));
    return kUsage;
  }
  const std::string failure = *python_dir + "/_ldscope_failure.py";
  if (access(failure.c_str(), R_OK) != 0) {
    Complain(fmt::format("hook: {} is missing from this install", text::Escape(failure)));
    return kUsage;
  }
  const std::string path = dir + "/" + kFileName;
  const Result<std::optional<std::string>> had = ReadIfThere(path);
  if (!had.ok()) {
    Complain("hook: " + had.error());
    return kUsage;
  }
  if (had->has_value() && !Ours(**had)) {
    Complain(fmt::format("hook: {} exists and was not written by ldscope; left as it is", text::Escape(path)));
    return kUsage;
  }
  store::Output out;
  Status s = store::OpenOutput(path, &out);
  const std::string text = PthText(*self, failure);
  if (s.ok()) {
    // Read by every Python that uses this site-packages, as the files pip installs.
    if (fchmod(out.fd, 0644) != 0 || store::WriteAll(out.fd, text.data(), text.size()) != 0) {
      s = Error{fmt::format("{}: {}", text::Escape(path), std::strerror(errno))};
      store::DiscardOutput(&out);
    } else {
      s = store::CommitOutput(&out);
    }
  }
  if (!s.ok()) {
    Complain("hook: " + s.error());
    return kWriteFailed;
  }
  if (!opt.quiet)
    Complain(fmt::format("hook: {} {}; it runs {} when a loader error ends a Python program",
                         had->has_value() ? "replaced" : "installed", text::Escape(path), text::Escape(*self)));
  return kOk;
}

int Uninstall(const HookOptions& opt, const std::string& dir) {
  const std::string path = dir + "/" + kFileName;
  const Result<std::optional<std::string>> had = ReadIfThere(path);
  if (!had.ok()) {
    Complain("hook: " + had.error());
    return kUsage;
  }
  if (!had->has_value()) {
    if (!opt.quiet) Complain(fmt::format("hook: no ldscope hook in {}; nothing to remove", text::Escape(dir)));
    return kOk;
  }
  if (!Ours(**had)) {
    Complain(fmt::format("hook: {} was not written by ldscope; left as it is", text::Escape(path)));
    return kUsage;
  }
  if (unlink(path.c_str()) != 0) {
    Complain(fmt::format("hook: cannot remove {}: {}", text::Escape(path), std::strerror(errno)));
    return kWriteFailed;
  }
  if (!opt.quiet) Complain(fmt::format("hook: removed {}", text::Escape(path)));
  return kOk;
}

}  // namespace

int Hook(const HookOptions& opt) {
  const Result<std::string> dir = SiteDir(opt);
  if (!dir.ok()) {
    Complain("hook: " + dir.error());
    return kUsage;
  }
  return opt.action == "install" ? Install(opt, *dir) : Uninstall(opt, *dir);
}

}  // namespace ldscope::cli
