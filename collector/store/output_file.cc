// See output_file.h.
#include "store/output_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace ldscope::store {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Splits "a/b/c" into "a/b" and "c" ("c" alone: "." and "c").
void SplitPath(const std::string& path, std::string* dir, std::string* base) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) {
    *dir = ".";
    *base = path;
  } else {
    *dir = slash == 0 ? "/" : path.substr(0, slash);
    *base = path.substr(slash + 1);
  }
}

// Another user can plant or swap entries in a sticky or world-writable directory.
bool Shared(const struct stat& dir) { return (dir.st_mode & (S_ISVTX | S_IWOTH)) != 0; }

std::string OpenError(const std::string& path, int err) {
  if (err == ENXIO) return fmt::format("cannot write {}: no process is reading from it", path);
  return fmt::format("cannot write {}: {}", path, ErrnoText(err));
}

constexpr int kWriteFlags = O_WRONLY | O_CLOEXEC | O_NOCTTY;

// A new 0600 file ".NAME.ldscope-XXXXXX" in dirfd: its descriptor, and its name in *temp.
Result<int> CreateTemp(int dirfd, const std::string& path, const std::string& name, std::string* temp) {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  // NAME_MAX is 255: a long name is shortened in the temporary one.
  const std::string stem = "." + name.substr(0, 200) + ".ldscope-";
  for (int attempt = 0; attempt < 64; ++attempt) {
    unsigned char random[8] = {};
    if (getrandom(random, sizeof random, GRND_NONBLOCK) != sizeof random)
      for (size_t i = 0; i < sizeof random; ++i)
        random[i] = static_cast<unsigned char>(getpid() * 31 + attempt * 7 + i * 13);
    std::string candidate = stem;
    for (unsigned char r : random) candidate += kAlphabet[r % (sizeof kAlphabet - 1)];
    const int fd = openat(dirfd, candidate.c_str(), kWriteFlags | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      *temp = std::move(candidate);
      return fd;
    }
    if (errno != EEXIST)
      return Error{fmt::format("cannot write {}: cannot create a file in its directory: {}", path, ErrnoText(errno))};
  }
  return Error{fmt::format("cannot write {}: no free temporary name in its directory", path)};
}

// Opens dir (the part of `path` before its last slash) for *-at calls.
Result<int> OpenDir(const std::string& path, const std::string& dir, struct stat* st) {
  const int dirfd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0 || fstat(dirfd, st) != 0) {
    const int err = errno;
    if (dirfd >= 0) close(dirfd);
    return Error{fmt::format("cannot write {}: directory {}: {}", path, dir, ErrnoText(err))};
  }
  return dirfd;
}

// Follows path's symbolic links by the rules of output_file.h to a name in a directory:
// *dirfd, *name and the entry's lstat (*st, st_mode 0 when it does not exist). A link
// allowed that leads to something other than a regular file or a directory (a pipe
// through /dev/stdout, a terminal), or any link of /proc/PID/fd, is not resolved by
// name: *special is then an O_PATH descriptor of it, and *dirfd -1.
Status Resolve(const std::string& path, int* dirfd, std::string* name, struct stat* st, int* special) {
  std::string current = path;
  const uid_t me = geteuid();
  for (int hops = 0; hops <= 40; ++hops) {
    std::string dir;
    SplitPath(current, &dir, name);
    if (name->empty() || *name == "." || *name == "..")
      return Error{fmt::format("cannot write {}: not a file name", path)};
    struct stat dir_st {};
    Result<int> fd = OpenDir(path, dir, &dir_st);
    if (!fd.ok()) return fd.status();
    *st = {};
    if (fstatat(*fd, name->c_str(), st, AT_SYMLINK_NOFOLLOW) != 0) {
      const int err = errno;
      if (err != ENOENT) {
        close(*fd);
        return Error{OpenError(path, err)};
      }
      *st = {};
    }
    if (!S_ISLNK(st->st_mode)) {
      *dirfd = *fd;
      return Status::Ok();
    }
    if (Shared(dir_st) && !(dir_st.st_uid == me && st->st_uid == me)) {
      close(*fd);
      return Error{
          fmt::format("refusing to write {}: it is a symbolic link in a directory others can write to "
                      "(link owned by uid {}, directory by uid {}); remove it or choose another path",
                      path, st->st_uid, dir_st.st_uid)};
    }
    // /proc's descriptor links (/dev/stdout) stand for an open file: a regular one is
    // written in place too, or the file the caller's descriptor holds would lose it.
    const bool proc = dir.rfind("/proc/", 0) == 0;
    const int opened = openat(*fd, name->c_str(), O_PATH | O_CLOEXEC);
    struct stat to_st {};
    if (opened >= 0 && fstat(opened, &to_st) == 0 && !S_ISDIR(to_st.st_mode) &&
        (proc || !S_ISREG(to_st.st_mode))) {
      close(*fd);
      *dirfd = -1;
      *special = opened;
      return Status::Ok();
    }
    if (opened >= 0) close(opened);
    char target[4096];
    const ssize_t n = readlinkat(*fd, name->c_str(), target, sizeof target - 1);
    close(*fd);
    if (n <= 0) return Error{OpenError(path, n < 0 ? errno : EINVAL)};
    const std::string to(target, static_cast<size_t>(n));
    current = to.front() == '/' ? to : dir + "/" + to;
  }
  return Error{OpenError(path, ELOOP)};
}

}  // namespace

Status OpenOutput(const std::string& path, Output* out, OutputMode mode) {
  DiscardOutput(out);
  *out = Output{};
  out->path = path;
  if (path == "-") {
    out->fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (out->fd < 0) return Error{fmt::format("cannot write to standard output: {}", ErrnoText(errno))};
    struct stat st {};
    out->regular = fstat(out->fd, &st) == 0 && S_ISREG(st.st_mode);
    return Status::Ok();
  }
  int dirfd = -1, special = -1;
  struct stat st {};
  if (Status s = Resolve(path, &dirfd, &out->name, &st, &special); !s.ok()) return s;
  if (special >= 0) {
    // Reopened for writing through its /proc/self/fd link, which the kernel follows.
    const std::string proc = fmt::format("/proc/self/fd/{}", special);
    out->fd = open(proc.c_str(), kWriteFlags | O_NONBLOCK | (mode == OutputMode::kAppend ? O_APPEND : 0));
    const int err = errno;
    close(special);
    if (out->fd < 0) return Error{OpenError(path, err)};
    fcntl(out->fd, F_SETFL, fcntl(out->fd, F_GETFL) & ~O_NONBLOCK);
    return Status::Ok();
  }
  if (S_ISDIR(st.st_mode)) {
    close(dirfd);
    return Error{OpenError(path, EISDIR)};
  }
  const bool exists = st.st_mode != 0;
  if (mode == OutputMode::kReplace && (!exists || S_ISREG(st.st_mode))) {
    Result<int> fd = CreateTemp(dirfd, path, out->name, &out->temp);
    if (!fd.ok()) {
      close(dirfd);
      return fd.status();
    }
    out->fd = *fd;
    out->dirfd = dirfd;
    out->regular = true;
    return Status::Ok();
  }
  // In place: appending, or a FIFO, a device, a socket. Non-blocking for the open only
  // (a FIFO without a reader); writes may wait.
  const int flags = kWriteFlags | O_NOFOLLOW | O_NONBLOCK | (mode == OutputMode::kAppend ? O_APPEND | O_CREAT : 0);
  out->fd = openat(dirfd, out->name.c_str(), flags, 0600);
  const int err = errno;
  close(dirfd);
  if (out->fd < 0) return Error{OpenError(path, err)};
  fcntl(out->fd, F_SETFL, fcntl(out->fd, F_GETFL) & ~O_NONBLOCK);
  struct stat now {};
  out->regular = fstat(out->fd, &now) == 0 && S_ISREG(now.st_mode);
  return Status::Ok();
}

Status CommitOutput(Output* out) {
  if (out->fd < 0) return Status::Ok();
  const int r = close(out->fd);
  const int close_err = errno;
  out->fd = -1;
  if (r != 0 && close_err != EINTR) {
    DiscardOutput(out);
    return Error{fmt::format("writing {} failed: {}", out->path, ErrnoText(close_err))};
  }
  if (out->temp.empty()) return Status::Ok();
  if (renameat(out->dirfd, out->temp.c_str(), out->dirfd, out->name.c_str()) != 0) {
    const int err = errno;
    DiscardOutput(out);
    return Error{fmt::format("cannot write {}: renaming the new file over it: {}", out->path, ErrnoText(err))};
  }
  close(out->dirfd);
  out->dirfd = -1;
  out->temp.clear();
  return Status::Ok();
}

Status PublishOutput(Output* out) {
  if (out->fd < 0 || out->temp.empty()) return Status::Ok();
  if (renameat(out->dirfd, out->temp.c_str(), out->dirfd, out->name.c_str()) != 0)
    return Error{fmt::format("cannot write {}: renaming the new file over it: {}", out->path, ErrnoText(errno))};
  close(out->dirfd);
  out->dirfd = -1;
  out->temp.clear();
  return Status::Ok();
}

void DiscardOutput(Output* out) {
  if (out->fd >= 0) close(out->fd);
  out->fd = -1;
  if (out->dirfd >= 0) {
    if (!out->temp.empty()) unlinkat(out->dirfd, out->temp.c_str(), 0);
    close(out->dirfd);
  }
  out->dirfd = -1;
  out->temp.clear();
}

int WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t r = write(fd, data, size);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) return EIO;
    data += r;
    size -= static_cast<size_t>(r);
  }
  return 0;
}

bool SameFile(const std::string& a, const std::string& b) {
  if (a == "-" && b == "-") return true;
  const std::string pa = a == "-" ? "/proc/self/fd/1" : a;
  const std::string pb = b == "-" ? "/proc/self/fd/1" : b;
  struct stat sa {}, sb {};
  const bool ea = stat(pa.c_str(), &sa) == 0, eb = stat(pb.c_str(), &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea != eb) return false;
  std::error_code e1, e2;
  const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(pa, e1), e1);
  const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(pb, e2), e2);
  return !e1 && !e2 && ca == cb;
}

Status CheckOutputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                    const std::vector<std::string>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    if (path.empty()) continue;
    // A character device (a terminal, /dev/null) is no one's data.
    struct stat st {};
    const bool device = path != "-" && stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
    for (const auto& in : inputs)
      if (!device && in != "-" && SameFile(path, in))
        return Error{fmt::format("the output {} {} is the input {}: refusing to overwrite it", option, path, in)};
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].second.empty() && !device && SameFile(path, outputs[j].second))
        return Error{fmt::format("the outputs {} {} and {} {} are the same file", outputs[j].first, outputs[j].second,
                                 option, path)};
  }
  return Status::Ok();
}

Status WriteTextFile(const std::string& path, const std::string& text, OutputMode mode) {
  Output out;
  if (Status s = OpenOutput(path, &out, mode); !s.ok()) return s;
  const std::string name = path == "-" ? "standard output" : path;
  if (const int err = WriteAll(out.fd, text.data(), text.size()); err != 0) {
    DiscardOutput(&out);
    return Error{fmt::format("writing {} failed: {}", name, ErrnoText(err))};
  }
  return CommitOutput(&out);
}

}  // namespace ldscope::store
