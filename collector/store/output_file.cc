// See output_file.h.
#include "store/output_file.h"

#include <fcntl.h>
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

// Opens base in dirfd as OpenOutput says: the descriptor.
Result<int> OpenIn(int dirfd, const struct stat& dir_st, const std::string& path,
                   const std::string& base, bool* created) {
  const int flags = O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  int fd = openat(dirfd, base.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    *created = true;
    return fd;
  }
  if (errno != EEXIST) {
    return Error{OpenError(path, errno)};
  }
  struct stat link {};
  if (fstatat(dirfd, base.c_str(), &link, AT_SYMLINK_NOFOLLOW) != 0) {
    return Error{OpenError(path, errno)};
  }
  const uid_t me = geteuid();
  const bool follow =
      S_ISLNK(link.st_mode) && (!Shared(dir_st) || (dir_st.st_uid == me && link.st_uid == me));
  if (S_ISLNK(link.st_mode) && !follow) {
    return Error{fmt::format(
        "refusing to write {}: it is a symbolic link in a directory others can write to "
        "(link owned by uid {}, directory by uid {}); remove it or choose another path",
        path, link.st_uid, dir_st.st_uid)};
  }
  fd = openat(dirfd, base.c_str(), follow ? flags | O_CREAT : flags | O_NOFOLLOW, 0600);
  if (fd < 0) return Error{OpenError(path, errno)};
  return fd;
}

}  // namespace

Status OpenOutput(const std::string& path, Output* out) {
  *out = Output{};
  out->path = path;
  if (path == "-") {
    out->fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (out->fd < 0) return Error{fmt::format("cannot write to standard output: {}", ErrnoText(errno))};
    return Status::Ok();
  }
  std::string dir, base;
  SplitPath(path, &dir, &base);
  if (base.empty() || base == "." || base == "..")
    return Error{fmt::format("cannot write {}: not a file name", path)};
  const int dirfd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat dir_st {};
  if (dirfd < 0 || fstat(dirfd, &dir_st) != 0) {
    const int err = errno;
    if (dirfd >= 0) close(dirfd);
    return Error{fmt::format("cannot write {}: directory {}: {}", path, dir, ErrnoText(err))};
  }
  Result<int> fd = OpenIn(dirfd, dir_st, path, base, &out->created);
  close(dirfd);
  if (!fd.ok()) return fd.status();
  out->fd = *fd;
  struct stat st {};
  if (fstat(out->fd, &st) != 0) {
    std::string error = OpenError(path, errno);
    DiscardOutput(out);
    return Error{std::move(error)};
  }
  out->regular = S_ISREG(st.st_mode);
  // Non-blocking was for the open only (a FIFO without a reader); writes may wait.
  fcntl(out->fd, F_SETFL, fcntl(out->fd, F_GETFL) & ~O_NONBLOCK);
  return Status::Ok();
}

int TruncateOutput(const Output& out) {
  if (!out.regular || out.created) return 0;
  return ftruncate(out.fd, 0) == 0 ? 0 : errno;
}

void DiscardOutput(Output* out) {
  if (out->fd < 0) return;
  if (out->created) {
    // Only if the name still means the file we created.
    struct stat ours {}, now {};
    if (fstat(out->fd, &ours) == 0 && lstat(out->path.c_str(), &now) == 0 &&
        ours.st_dev == now.st_dev && ours.st_ino == now.st_ino)
      unlink(out->path.c_str());
  }
  close(out->fd);
  out->fd = -1;
}

Status CloseOutput(Output* out) {
  if (out->fd < 0) return Status::Ok();
  const int r = close(out->fd);
  out->fd = -1;
  if (r != 0 && errno != EINTR) return Error{fmt::format("writing {} failed: {}", out->path, ErrnoText(errno))};
  return Status::Ok();
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

Status WriteTextFile(const std::string& path, const std::string& text) {
  Output out;
  if (Status s = OpenOutput(path, &out); !s.ok()) return s;
  if (const int err = TruncateOutput(out); err != 0) {
    DiscardOutput(&out);
    return Error{OpenError(path, err)};
  }
  const std::string name = path == "-" ? "standard output" : path;
  if (const int err = WriteAll(out.fd, text.data(), text.size()); err != 0) {
    // The write error is the one to report; a close error after it adds nothing.
    CloseOutput(&out).IgnoreError();
    return Error{fmt::format("writing {} failed: {}", name, ErrnoText(err))};
  }
  return CloseOutput(&out);
}

}  // namespace ldscope::store
