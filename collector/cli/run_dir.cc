// See run_dir.h.
#include "cli/run_dir.h"

#include "cli/commands.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace ldscope::cli {
namespace {

constexpr char kOwner[] = "owner";
constexpr char kSocket[] = "events.sock";

// The start time of pid (field 22 of /proc/PID/stat, in clock ticks since boot), or "".
std::string StartTime(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return "";
  std::istringstream rest(stat.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return field;
  return "";
}

std::string PidNamespace() {
  char buf[64];
  const ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::string OwnerLine() {
  const std::string pid = std::to_string(getpid());
  return fmt::format("ldscope-run {} {} {}\n", pid, StartTime(pid), PidNamespace());
}

// True when the owner line names a process of our namespace that is gone.
bool OwnerDead(const std::string& line) {
  std::istringstream in(line);
  std::string tag, pid, start, ns;
  if (!(in >> tag >> pid >> start >> ns) || tag != "ldscope-run" || ns != PidNamespace())
    return false;
  if (pid.find_first_not_of("0123456789") != std::string::npos) return false;
  const std::string now = StartTime(pid);
  return now.empty() || now != start;
}

std::string ReadSmall(int dirfd, const char* name) {
  const int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// One candidate directory (already known to be named ldscope-XXXXXX).
void CleanOne(int tmpfd, const std::string& name) {
  const int d = openat(tmpfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (d < 0) return;
  struct stat st {};
  bool ours = fstat(d, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700;
  std::vector<std::string> entries;
  if (DIR* dir = ours ? fdopendir(dup(d)) : nullptr) {
    while (dirent* e = readdir(dir)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") entries.push_back(n);
    }
    closedir(dir);
  }
  for (const auto& n : entries) ours &= n == kOwner || n == kSocket;
  struct stat sock {};
  if (ours && fstatat(d, kSocket, &sock, AT_SYMLINK_NOFOLLOW) == 0) ours &= S_ISSOCK(sock.st_mode);
  if (ours && OwnerDead(ReadSmall(d, kOwner))) {
    unlinkat(d, kSocket, 0);
    unlinkat(d, kOwner, 0);
    unlinkat(tmpfd, name.c_str(), AT_REMOVEDIR);
  }
  close(d);
}

}  // namespace

Result<std::string> MakeRunDir(const std::string& tmpdir) {
  Result<std::string> made = MakePrivateDir(tmpdir, "ldscope");
  if (!made.ok()) return made;
  const std::string dir = std::move(made).value();
  const std::string owner = OwnerLine();
  const int fd = open((dir + "/" + kOwner).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, owner.data(), owner.size()) != static_cast<ssize_t>(owner.size())) {
    const int err = errno;
    if (fd >= 0) close(fd);
    RemoveRunDir(dir);
    return Error{fmt::format("cannot write {}/{}: {}", dir, kOwner, std::strerror(err))};
  }
  close(fd);
  return dir;
}

void RemoveRunDir(const std::string& dir) {
  unlink((dir + "/" + kSocket).c_str());
  unlink((dir + "/" + kOwner).c_str());
  rmdir(dir.c_str());
}

void CleanStaleRunDirs(const std::string& tmpdir) {
  const int tmpfd = open(tmpdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tmpfd < 0) return;
  std::vector<std::string> names;
  if (DIR* dir = fdopendir(dup(tmpfd))) {
    while (dirent* e = readdir(dir)) {
      const std::string n = e->d_name;
      if (n.size() == 14 && n.compare(0, 8, "ldscope-") == 0) names.push_back(n);
    }
    closedir(dir);
  }
  for (const auto& n : names) CleanOne(tmpfd, n);
  close(tmpfd);
}

}  // namespace ldscope::cli
