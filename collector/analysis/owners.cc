// See owners.h. The layouts are the ones the package managers write: conda's
// <prefix>/conda-meta/<name>-<version>-<build>.json with "name", "version", "build" and
// "files" (paths relative to the prefix); dpkg's <admindir>/info/<package>[:<arch>].list
// (one absolute path a line) and <admindir>/status (RFC 822 stanzas); pip's in
// pip_owner.h. RPM's database is a format of rpm's own (sqlite, Berkeley DB or ndb, by
// build and version): rpm itself is asked, as the user would ask it.
#include "analysis/owners.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "analysis/pip_owner.h"
#include "text/escape.h"
#include "text/shown.h"

extern char** environ;

namespace ldscope::analysis {
namespace {

namespace fs = std::filesystem;

// Calls f with each line of text (without its '\n').
template <typename F>
void EachLine(const std::string& text, F&& f) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    f(std::string_view(text.data() + at, end - at));
    at = end + 1;
  }
}

// ---- conda ----

struct CondaPackage {
  std::string name, version, build, json;
};

struct CondaPrefix {
  std::unordered_map<std::string, size_t> files;  // prefix-relative path -> package
  std::vector<CondaPackage> packages;
};

// The innermost directory above path that holds conda-meta/; "" when none.
std::string CondaPrefixOf(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  for (int depth = 0; depth < 64 && !dir.empty() && dir != dir.root_path(); ++depth, dir = dir.parent_path()) {
    std::error_code ec;
    if (fs::is_directory(dir / "conda-meta", ec)) return dir.string();
  }
  return "";
}

std::string StringField(const google::protobuf::Struct& s, const char* key) {
  const auto it = s.fields().find(key);
  return it == s.fields().end() ? "" : it->second.string_value();
}

CondaPrefix ReadConda(const std::string& prefix) {
  CondaPrefix out;
  std::vector<fs::path> jsons;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(prefix) / "conda-meta", ec), end;
       !ec && it != end && jsons.size() < kMaxCondaRecords; it.increment(ec))
    if (it->path().extension() == ".json") jsons.push_back(it->path());
  std::sort(jsons.begin(), jsons.end());
  size_t budget = kMaxCondaBytes;
  for (const auto& j : jsons) {
    const std::string text = ReadPackageFile(j.string(), budget);
    budget -= std::min(budget, text.size());
    google::protobuf::Struct s;
    google::protobuf::util::JsonParseOptions opt;
    opt.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(text, &s, opt).ok()) continue;
    CondaPackage p{StringField(s, "name"), StringField(s, "version"), StringField(s, "build"), j.string()};
    if (p.name.empty()) continue;
    const size_t index = out.packages.size();
    out.packages.push_back(p);
    const auto files = s.fields().find("files");
    if (files != s.fields().end())
      for (const auto& v : files->second.list_value().values()) out.files.emplace(v.string_value(), index);
    if (budget == 0) break;
  }
  return out;
}

// ---- dpkg ----

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The path as dpkg may list it: as loaded, its target, each with and without /usr for
// the directories a merged /usr links (/lib -> usr/lib, /bin, /sbin).
std::vector<std::string> Spellings(const std::string& path) {
  std::vector<std::string> out = {path};
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (!ec && real.string() != path) out.push_back(real.string());
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string p = out[i];  // a copy: out grows
    for (std::string_view top : {"/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin"}) {
      if (StartsWith(p, std::string(top) + "/")) out.push_back("/usr" + p);
      if (StartsWith(p, "/usr" + std::string(top) + "/")) out.push_back(p.substr(4));
    }
  }
  return out;
}

struct DpkgVersion {
  std::string version, multi_arch;
};

// Package[:arch] -> version, for the packages named (status stanzas of installed ones).
std::map<std::string, DpkgVersion> DpkgVersions(const std::string& admin, const std::set<std::string>& wanted) {
  std::map<std::string, DpkgVersion> out;
  const std::string status = ReadPackageFile((fs::path(admin) / "status").string(), kMaxDpkgBytes);
  std::string package, arch, version, multi_arch, state;
  auto flush = [&]() {
    if (!package.empty() && state.find(" installed") != std::string::npos) {
      for (const std::string& key : {package + ":" + arch, package})
        if (wanted.count(key) != 0) out[key] = {version, multi_arch};
    }
    package.clear(), arch.clear(), version.clear(), multi_arch.clear(), state.clear();
  };
  EachLine(status, [&](std::string_view line) {
    if (line.empty()) return flush();
    auto value = [&](std::string_view key, std::string* to) {
      if (StartsWith(line, key)) *to = std::string(line.substr(key.size()));
    };
    value("Package: ", &package);
    value("Architecture: ", &arch);
    value("Version: ", &version);
    value("Multi-Arch: ", &multi_arch);
    value("Status: ", &state);
  });
  flush();
  return out;
}

// ---- rpm ----

using Clock = std::chrono::steady_clock;

// What a program printed, run with no shell until it exits or the deadline passes (then
// it and its process group are killed), keeping at most limit bytes of stdout.
struct Ran {
  std::string error;  // it could not be started
  bool timed_out = false, truncated = false;
  std::string out, err;
};

Ran Failed(std::string why) {
  Ran r;
  r.error = std::move(why);
  return r;
}

// The user's environment, in the C locale (rpm's messages are matched by their text),
// without the loader's variables (the traced command's LD_LIBRARY_PATH, LD_PRELOAD,
// LD_DEBUG, an audit library) or ldscope's socket: rpm loads as the system's own
// program, its loads never enter a trace or the command's LD_DEBUG output.
std::vector<std::string> RpmEnvironment() {
  std::vector<std::string> env_text;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (!StartsWith(*e, "LC_ALL=") && !StartsWith(*e, "LANGUAGE=") && !StartsWith(*e, "LD_") &&
        !StartsWith(*e, "LDSCOPE_"))
      env_text.emplace_back(*e);
  env_text.emplace_back("LC_ALL=C");
  return env_text;
}

// Standard output (up to limit) and error of a child until both close or the deadline;
// true when reading stopped before the child closed its output.
bool ReadOutputs(int out_fd, int err_fd, Clock::time_point deadline, size_t limit, Ran* r) {
  constexpr size_t kMaxErr = 64 << 10;
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* to[2] = {&r->out, &r->err};
  const size_t cap[2] = {limit, kMaxErr};
  int open_fds = 2;
  char buf[1 << 16];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r->timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      to[i]->append(buf, std::min(static_cast<size_t>(got), cap[i] - std::min(cap[i], to[i]->size())));
      if (i == 0 && to[0]->size() >= limit) r->truncated = true;
    }
    if (r->truncated) break;
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  return open_fds > 0;
}

Ran RunBounded(const std::vector<std::string>& argv, Clock::time_point deadline, size_t limit) {
  Ran r;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_text = RpmEnvironment();
  std::vector<char*> env;
  for (auto& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Failed(fmt::format("cannot make a pipe: {}", std::strerror(errno)));
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out[0]), close(out[1]);
    return Failed(fmt::format("cannot make a pipe: {}", std::strerror(e)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, args[0], &fa, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out[1]), close(err[1]);
  if (spawned != 0) {
    close(out[0]), close(err[0]);
    return Failed(fmt::format("cannot start {}: {}", argv[0], std::strerror(spawned)));
  }
  const bool stopped = ReadOutputs(out[0], err[0], deadline, limit, &r);
  // It exits by the deadline, or it (and what it started) is killed.
  int status = 0;
  for (;;) {
    if (!stopped) {
      const pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid || (w < 0 && errno != EINTR)) return r;
      if (w == 0 && Clock::now() < deadline) {
        usleep(10000);
        continue;
      }
      if (w == 0) r.timed_out = true;
    }
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return r;
  }
}

// The rpm a user's shell would run: the first on PATH, else /usr/bin/rpm; "" when none.
std::string FindRpm() {
  const char* path = std::getenv("PATH");
  std::vector<std::string> candidates;
  for (std::string_view rest = path == nullptr ? "" : path; !rest.empty();) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') candidates.push_back(std::string(dir) + "/rpm");
    rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
  }
  candidates.push_back("/usr/bin/rpm");
  for (const auto& c : candidates) {
    struct stat st;
    if (stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

// A file's lines from `rpm -qf`: "file F is not owned by any package" (F as rpm cleaned
// it: "//" and "/./" made "/"), or an owner line of the query format (the first one,
// when several packages own it). False when neither is there.
bool TakeRpmAnswer(const std::vector<std::string>& lines, const std::string& dbpath, v1::OwnerFacts* o) {
  for (const auto& line : lines) {
    if (StartsWith(line, "file ") && line.size() > 33 &&
        line.substr(line.size() - 28) == " is not owned by any package") {
      o->set_manager(v1::OwnerFacts::MANAGER_NONE);
      return true;
    }
    std::vector<std::string> f;
    for (size_t at = 0;;) {
      const size_t tab = line.find('\t', at);
      f.push_back(line.substr(at, tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    if (f.size() == 4 && f[0] == "owner" && !f[1].empty()) {
      o->set_manager(v1::OwnerFacts::MANAGER_RPM);
      o->set_name(f[1]);
      o->set_version(f[2]);
      if (f[3] != "(none)") o->set_arch(f[3]);
      o->set_record(dbpath);
      return true;
    }
  }
  return false;
}

// Why a batch left a file without an answer.
std::string NoAnswer(const Ran& r, const OwnerDatabases& db) {
  if (!r.error.empty()) return "could not be run: " + r.error;
  if (r.timed_out) return fmt::format("did not answer within {} s", db.rpm_timeout.count() / 1000.0);
  if (r.truncated) return "answered more than ldscope reads";
  const std::string err = r.err.substr(0, r.err.find('\n'));
  return "did not answer" + (err.empty() ? std::string() : ": " + err);
}

enum class Rpm { kAbsent, kNoDatabase, kAsked };

// Asks rpm who owns each file (o: their records, manager unknown so far). kAbsent when
// there is no rpm, kNoDatabase when its database (rpm --eval %_dbpath, which reads the
// user's ~/.rpmmacros) is not a directory: the files are left as they are. Else each
// file gets the package rpm names (the first, when several share it), none when rpm
// says that no package owns it, or unknown with rpm's reason.
//
// One `rpm -qf` per batch of files. rpm prints one line per owning package of each
// argument, in argument order, or "file F is not owned by any package"; an owner's line
// (--qf) cannot name the file it answers for, so a marker, a file of ldscope's own that
// no package owns, follows each argument: the lines between two markers are that file's.
// This is exact where a file has several owners, and asks the database only for the files
// wanted (listing every package's files with -qa would print the whole database).
// unlisted: what the unknown reasons begin with ("no pip, conda or dpkg record lists it").
Rpm AskRpm(const OwnerDatabases& db, const std::vector<v1::OwnerFacts*>& files, const std::string& unlisted) {
  const std::string rpm = db.rpm_program.empty() ? FindRpm() : db.rpm_program;
  if (rpm.empty() || access(rpm.c_str(), X_OK) != 0) return Rpm::kAbsent;
  const auto deadline = Clock::now() + db.rpm_timeout;
  const Ran eval = RunBounded({rpm, "--eval", "%_dbpath"}, deadline, 64 << 10);
  std::string dbpath = eval.out.substr(0, eval.out.find('\n'));
  std::error_code ec;
  if (!eval.error.empty() || eval.timed_out) {
    for (auto* o : files)
      o->set_unknown(fmt::format("{}, and {} --eval %_dbpath {}", unlisted, rpm,
                                 eval.timed_out ? "did not answer" : "could not be run: " + eval.error));
    return Rpm::kAsked;
  }
  if (dbpath.empty() || dbpath.front() != '/' || !fs::is_directory(dbpath, ec)) return Rpm::kNoDatabase;
  auto unknown = [&](v1::OwnerFacts* o, const std::string& why) {
    o->set_unknown(fmt::format("{}, and rpm ({}, database {}) {}", unlisted, rpm, dbpath, why));
  };
  // The marker: a new empty file, so that rpm finds it and says no package owns it.
  // In a directory named as rpm prints it (rpm cleans the paths it is given).
  std::string marker = (fs::canonical(fs::temp_directory_path(ec), ec) / "ldscope-rpm-XXXXXX").string();
  const int fd = mkstemp(marker.data());
  if (fd < 0) {
    const std::string why = fmt::format("was not asked: cannot make a file in {}: {}",
                                        fs::path(marker).parent_path().string(), std::strerror(errno));
    for (auto* o : files) unknown(o, why);
    return Rpm::kAsked;
  }
  close(fd);
  const std::string marker_line = "file " + marker + " is not owned by any package";
  // --qf: "owner", NAME, [EPOCH:]VERSION-RELEASE, ARCH; tabs, which names lack.
  const std::string qf = "owner\t%{NAME}\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\t%{ARCH}\n";
  constexpr size_t kBatch = 256;
  for (size_t first = 0; first < files.size(); first += kBatch) {
    const size_t last = std::min(files.size(), first + kBatch);
    std::vector<std::string> argv = {rpm, "-qf", "--qf", qf};
    std::vector<v1::OwnerFacts*> asked;
    for (size_t i = first; i < last; ++i) {
      const std::string& p = files[i]->paths(0);
      // rpm's answer is a line: a name with a newline could not be matched with it.
      if (p.find('\n') != std::string::npos || p.empty() || p.front() != '/') {
        unknown(files[i], "was not asked: the path is not absolute, or not one line");
        continue;
      }
      asked.push_back(files[i]);
      argv.push_back(p);
      argv.push_back(marker);
    }
    if (asked.empty()) continue;
    const Ran r = RunBounded(argv, deadline, kMaxRpmOutput);
    // The lines before each marker; a batch cut short leaves the files after the cut.
    std::vector<std::vector<std::string>> answers(1);
    EachLine(r.out, [&](std::string_view line) {
      if (line == marker_line)
        answers.emplace_back();
      else
        answers.back().emplace_back(line);
    });
    answers.pop_back();  // what follows the last marker: a line cut short, if anything
    for (size_t i = 0; i < asked.size(); ++i) {
      v1::OwnerFacts* o = asked[i];
      const std::string& p = o->paths(0);
      if (i >= answers.size()) {
        unknown(o, NoAnswer(r, db));
        continue;
      }
      const bool answered = TakeRpmAnswer(answers[i], dbpath, o);
      if (answered) continue;
      // rpm's complaint about this file (on stderr: "error: file F: No such file or directory").
      std::string why;
      EachLine(r.err, [&](std::string_view line) {
        if (why.empty() && line.find(p) != std::string_view::npos) why = std::string(line);
      });
      unknown(o, "did not answer for it" + (why.empty() ? std::string() : ": " + why));
    }
  }
  fs::remove(marker, ec);
  return Rpm::kAsked;
}

// The conda package, else the pip distribution, that lists path (manager unknown when
// neither does); conda: the prefixes read so far.
v1::OwnerFacts CondaOrPipOwner(const std::string& path, std::map<std::string, CondaPrefix>& conda) {
  v1::OwnerFacts o;
  o.add_paths(path);
  const std::string prefix = CondaPrefixOf(path);
  if (!prefix.empty()) {
    auto it = conda.find(prefix);
    if (it == conda.end()) it = conda.emplace(prefix, ReadConda(prefix)).first;
    const std::string rel = fs::path(path).lexically_relative(prefix).string();
    if (const auto f = it->second.files.find(rel); f != it->second.files.end()) {
      const CondaPackage& p = it->second.packages[f->second];
      o.set_manager(v1::OwnerFacts::MANAGER_CONDA);
      o.set_name(p.name);
      o.set_version(p.build.empty() ? p.version : p.version + "=" + p.build);
      o.set_record(p.json);
      o.set_root(prefix);
    }
  }
  if (o.manager() == v1::OwnerFacts::MANAGER_UNKNOWN) {
    if (const auto d = PipOwner(path); d && !d->name.empty()) {
      o.set_manager(v1::OwnerFacts::MANAGER_PIP);
      o.set_name(d->name);
      o.set_version(d->version);
      o.set_record(d->dist_info + "/RECORD");
      o.set_root(fs::path(d->dist_info).parent_path().string());
      for (const auto& t : d->tags) o.add_tags(t);
      for (const auto& r : d->requires_dist) o.add_requires_dist(r);
    }
  }
  return o;
}

// What dpkg's lists say of the spellings wanted (a spelling -> indexes of the files
// spelled so).
struct DpkgLists {
  bool have = false;                     // dpkg has a database here
  bool complete = true;                  // every list was read
  std::map<size_t, std::string> listed;  // index -> package[:arch]
  std::map<size_t, std::string> record;  // index -> the .list that lists it
};

// Every .list once, in name order (the first that lists a file owns it), within
// kMaxDpkgLists lists and kMaxDpkgBytes bytes.
DpkgLists ReadDpkgLists(const std::string& admin, const std::unordered_map<std::string, std::vector<size_t>>& wanted) {
  DpkgLists out;
  std::vector<fs::path> lists;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(admin) / "info", ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".list") continue;
    if (lists.size() == kMaxDpkgLists) {
      out.complete = false;
      break;
    }
    lists.push_back(it->path());
  }
  out.have = !lists.empty();
  std::sort(lists.begin(), lists.end());
  size_t budget = kMaxDpkgBytes;
  for (const auto& l : lists) {
    if (budget == 0) {
      out.complete = false;
      break;
    }
    const std::string text = ReadPackageFile(l.string(), budget);
    budget -= std::min(budget, text.size());
    const std::string package = l.stem().string();
    EachLine(text, [&](std::string_view line) {
      const auto w = wanted.find(std::string(line));
      if (w == wanted.end()) return;
      for (size_t i : w->second)
        if (out.listed.emplace(i, package).second) out.record[i] = l.string();
    });
  }
  return out;
}

}  // namespace

std::vector<v1::OwnerFacts> RecordOwners(const std::set<std::string>& paths, const OwnerDatabases& db) {
  std::vector<v1::OwnerFacts> out;
  std::map<std::string, CondaPrefix> conda;
  // A spelling dpkg may list -> the indexes in out of the paths spelled so (two loaded
  // paths can share one: /lib and /usr/lib under a merged /usr).
  std::unordered_map<std::string, std::vector<size_t>> wanted;
  for (const std::string& path : paths) {
    v1::OwnerFacts o = CondaOrPipOwner(path, conda);
    if (o.manager() == v1::OwnerFacts::MANAGER_UNKNOWN)
      for (const auto& s : Spellings(path)) wanted[s].push_back(out.size());
    out.push_back(std::move(o));
  }
  if (wanted.empty()) return out;
  const DpkgLists dpkg = ReadDpkgLists(db.dpkg, wanted);
  const bool complete = dpkg.complete;
  const auto& listed = dpkg.listed;
  std::set<std::string> packages;
  for (const auto& [i, p] : listed) packages.insert(p);
  const auto versions = DpkgVersions(db.dpkg, packages);
  std::set<size_t> asked;
  for (const auto& [s, indexes] : wanted) asked.insert(indexes.begin(), indexes.end());
  std::vector<v1::OwnerFacts*> for_rpm;
  if (complete)
    for (size_t i : asked)
      if (listed.count(i) == 0) for_rpm.push_back(&out[i]);
  // Where rpm is found, its own database path is the one that counts.
  const std::string unlisted = dpkg.have ? "no pip, conda or dpkg record lists it" : "no pip or conda record lists it";
  const Rpm rpm_answer = for_rpm.empty() ? Rpm::kAbsent : AskRpm(db, for_rpm, unlisted);
  const bool rpm_asked = rpm_answer == Rpm::kAsked;
  std::string rpm;
  std::error_code ec;
  if (rpm_answer == Rpm::kAbsent)
    for (const auto& r : db.rpm)
      if (fs::is_directory(r, ec) && rpm.empty()) rpm = r;
  for (size_t i : asked) {
    v1::OwnerFacts& o = out[i];
    if (rpm_asked && listed.count(i) == 0) {
      continue;  // rpm's answer
    } else if (const auto l = listed.find(i); l != listed.end()) {
      const size_t colon = l->second.find(':');
      o.set_manager(v1::OwnerFacts::MANAGER_DPKG);
      o.set_name(l->second.substr(0, colon));
      if (colon != std::string::npos) o.set_arch(l->second.substr(colon + 1));
      if (const auto v = versions.find(l->second); v != versions.end()) o.set_version(v->second.version);
      o.set_record(dpkg.record.at(i));
    } else if (!complete) {
      o.set_unknown("dpkg's database is larger than ldscope reads");
    } else if (!rpm.empty()) {
      o.set_unknown(unlisted + ", and the RPM database (" + rpm + ") is not read: no rpm program to read it");
    } else {
      o.set_manager(v1::OwnerFacts::MANAGER_NONE);
    }
  }
  return out;
}

std::string OwnerText(const v1::Owner* o) {
  if (o == nullptr) return "unknown (the trace records no owner for it)";
  switch (o->manager()) {
    case v1::OwnerFacts::MANAGER_NONE:
      return "not owned by any package";
    case v1::OwnerFacts::MANAGER_PIP:
      return fmt::format("pip distribution {} {} ({})", o->name(), o->version(), o->record());
    case v1::OwnerFacts::MANAGER_CONDA:
      return fmt::format("conda package {} {} ({})", o->name(), o->version(), o->record());
    case v1::OwnerFacts::MANAGER_DPKG:
      return fmt::format("Debian package {} {}{}", o->name(), o->version(),
                         o->arch().empty() ? "" : " (" + o->arch() + ")");
    case v1::OwnerFacts::MANAGER_RPM:
      return fmt::format("RPM package {} {}{}", o->name(), o->version(),
                         o->arch().empty() ? "" : " (" + o->arch() + ")");
    default:
      return fmt::format("unknown ({})", o->unknown().empty() ? "not looked up" : o->unknown());
  }
}

namespace {

text::Shown Command(const v1::Owner* o, bool again) {
  if (o == nullptr) return "";
  // Each word quoted for the shell.
  const auto q = [](const std::string& word) { return text::ShellQuote(word); };
  switch (o->manager()) {
    case v1::OwnerFacts::MANAGER_PIP:
      return text::Show("pip install {}{}", again ? "--force-reinstall " : "", q(o->name() + "==" + o->version()));
    case v1::OwnerFacts::MANAGER_CONDA:
      return text::Show("conda install -p {} {}{}", q(o->root()), again ? "--force-reinstall " : "",
                        q(o->name() + "=" + o->version()));
    case v1::OwnerFacts::MANAGER_DPKG:
      return text::Show(
          "apt-get install {}{}", again ? "--reinstall " : "",
          q(o->name() + (o->arch().empty() ? "" : ":" + o->arch()) + (o->version().empty() ? "" : "=" + o->version())));
    case v1::OwnerFacts::MANAGER_RPM:
      return text::Show("dnf {} {}", again ? "reinstall" : "install",
                        q(o->name() + "-" + o->version() + (o->arch().empty() ? "" : "." + o->arch())));
    default:
      return "";
  }
}

}  // namespace

text::Shown ReinstallCommand(const v1::Owner* o) { return Command(o, true); }
text::Shown PinCommand(const v1::Owner* o) { return Command(o, false); }

}  // namespace ldscope::analysis
