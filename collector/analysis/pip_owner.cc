// See pip_owner.h. The layout is the one pip writes (PEP 376, PEP 627): each installed
// distribution has NAME-VERSION.dist-info/ in the site-packages directory, whose RECORD
// is CSV (path relative to that directory, hash, size).
#include "analysis/pip_owner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "analysis/context.h"
#include "text/escape.h"

namespace ldscope::analysis {

// Opened without blocking (a FIFO named like a package file would hold the reader) and
// read only when it is a regular file, up to the size fstat gives and limit: a file
// that grows while read, or a /proc file, gives at most that; nothing is read past
// the buffer.
std::string ReadPackageFile(const std::string& path, size_t limit) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return "";
  std::string out;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    out.resize(static_cast<size_t>(std::min<uint64_t>(limit, static_cast<uint64_t>(st.st_size))));
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = read(fd, out.data() + got, out.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
  }
  close(fd);
  return out;
}

namespace {

// A distribution's name as the directory names it, compared case-blind with '-' and '.'
// as '_' (PEP 503's normalisation, spelled as wheels spell it).
std::string Normalized(std::string_view s) {
  std::string out;
  for (char c : s) out += (c == '-' || c == '.') ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The first CSV field of a RECORD line (quoted when the path holds a comma or quote).
std::string FirstField(std::string_view line) {
  if (line.empty() || line.front() != '"') return std::string(line.substr(0, line.find(',')));
  std::string out;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '"') {
      if (i + 1 < line.size() && line[i + 1] == '"') {
        out += '"';
        ++i;
        continue;
      }
      break;
    }
    out += line[i];
  }
  return out;
}

bool RecordLists(const std::string& record, const std::string& rel) {
  size_t at = 0;
  while (at < record.size()) {
    size_t end = record.find('\n', at);
    if (end == std::string::npos) end = record.size();
    std::string_view line(record.data() + at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (FirstField(line) == rel) return true;
    at = end + 1;
  }
  return false;
}

// The headers of METADATA and WHEEL (RFC 822 style, up to the first empty line).
void ReadHeaders(const std::filesystem::path& dir, PipDistribution* d) {
  const std::string meta = ReadPackageFile((dir / "METADATA").string(), 1 << 20);
  const std::string wheel = ReadPackageFile((dir / "WHEEL").string(), 64 << 10);
  auto each = [](const std::string& text, auto&& f) {
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + at, end - at);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) return;
      f(line);
      at = end + 1;
    }
  };
  auto value = [](std::string_view line, std::string_view key, std::string* out) {
    if (line.size() <= key.size() || line.substr(0, key.size()) != key) return false;
    *out = line.substr(key.size());
    return true;
  };
  each(meta, [&](std::string_view line) {
    std::string v;
    if (value(line, "Name: ", &v))
      d->name = v;
    else if (value(line, "Version: ", &v))
      d->version = v;
    else if (value(line, "Requires-Dist: ", &v))
      d->requires_dist.push_back(v);
  });
  each(wheel, [&](std::string_view line) {
    std::string v;
    if (value(line, "Tag: ", &v)) d->tags.push_back(v);
  });
}

}  // namespace

std::optional<PipDistribution> PipOwner(const std::string& path) {
  const std::string raw = NormalPath(path);
  // The innermost site-packages (or Debian's dist-packages) directory above the file.
  size_t at = std::string::npos, len = 0;
  for (std::string_view dir : {"/site-packages/", "/dist-packages/"}) {
    const size_t found = raw.rfind(dir);
    if (found != std::string::npos && (at == std::string::npos || found > at)) {
      at = found;
      len = dir.size();
    }
  }
  if (at == std::string::npos) return std::nullopt;
  const std::filesystem::path root = raw.substr(0, at + len - 1);
  const std::string rel = raw.substr(at + len);
  const std::string top = Normalized(rel.substr(0, rel.find('/')));
  // The distributions whose name starts its top-level directory or file (torch owns
  // torch/, nvidia_cublas_cu12 owns nvidia/...) are asked first.
  std::vector<std::pair<bool, std::filesystem::path>> infos;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(root, ec), end; !ec && it != end && infos.size() < kMaxDistInfos;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t suffix = name.rfind(".dist-info");
    if (suffix == std::string::npos || suffix + 10 != name.size()) continue;
    const std::string dist = Normalized(name.substr(0, name.find('-')));
    const bool likely = !dist.empty() && (top.rfind(dist, 0) == 0 || dist.rfind(top, 0) == 0);
    infos.emplace_back(!likely, it->path());
  }
  std::sort(infos.begin(), infos.end());
  size_t budget = kMaxRecordBytes;
  for (const auto& [unlikely, dir] : infos) {
    const std::string record = ReadPackageFile((dir / "RECORD").string(), budget);
    budget -= std::min(budget, record.size());
    if (RecordLists(record, rel)) {
      PipDistribution d;
      d.dist_info = dir.string();
      ReadHeaders(dir, &d);
      return d;
    }
    if (budget == 0) break;
  }
  return std::nullopt;
}

const std::optional<PipDistribution>& PipOwners::Of(const std::string& path) {
  auto it = known_.find(path);
  if (it != known_.end()) return it->second;
  std::optional<PipDistribution> d;
  if (const v1::Owner* o = ctx_.OwnerOf(path); o != nullptr && o->manager() == v1::OwnerFacts::MANAGER_PIP) {
    d.emplace();
    d->name = o->name();
    d->version = o->version();
    d->dist_info = o->record().substr(0, o->record().rfind('/'));
    d->tags.assign(o->tags().begin(), o->tags().end());
    d->requires_dist.assign(o->requires_dist().begin(), o->requires_dist().end());
  }
  return known_.emplace(path, std::move(d)).first->second;
}

std::string PipLabel(const std::optional<PipDistribution>& d) {
  if (!d || d->name.empty()) return "";
  return d->version.empty() ? d->name : fmt::format("{} {}", d->name, d->version);
}

}  // namespace ldscope::analysis
