// See test_support.h.
#include "support/test_support.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/timeline.h"
#include "store/trace_file.h"
#include "support/canonical.h"

extern char** environ;

namespace ldscope::testing {

Proc RunCmd(const std::vector<std::string>& argv, const std::vector<std::string>& set,
         const std::vector<std::string>& unset, int timeout_s) {
  Proc r;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    // Tests decide about CI output themselves, wherever the suite runs; the CI job ids
    // would reach traces (and goldens) through the audit library's environment record.
    // OpenTelemetry's variables would redirect and reshape the OTLP tests' exports.
    bool drop = name == "GITHUB_ACTIONS" || name == "GITHUB_STEP_SUMMARY" || name == "GITHUB_RUN_ID" ||
                name == "CI_JOB_ID" || name.rfind("OTEL_", 0) == 0;
    for (const auto& u : unset) drop |= (u == name);
    for (const auto& s : set) drop |= (s.substr(0, s.find('=')) == name);
    if (!drop) env.push_back(entry);
  }
  for (const auto& s : set) env.push_back(s);
  std::vector<char*> envp, args;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return r;
  timespec t0{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    setpgid(0, 0);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  const time_t deadline = time(nullptr) + timeout_s;
  while (open_fds > 0) {
    const int left_ms = static_cast<int>(deadline - time(nullptr)) * 1000;
    if (left_ms <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, left_ms) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
      char buf[65536];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  waitpid(pid, &r.raw_status, 0);
  timespec t1{};
  clock_gettime(CLOCK_MONOTONIC, &t1);
  r.seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  r.code = WIFEXITED(r.raw_status) ? WEXITSTATUS(r.raw_status) : 128 + WTERMSIG(r.raw_status);
  return r;
}

std::string ScratchDir(const std::string& name) {
  // Always under the build tree, whatever directory the test binary runs from.
  const auto dir = std::filesystem::path(TEST_SCRATCH_ROOT) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
}

v1::Timeline TimelineOf(const std::vector<std::string>& traces) {
  return model::BuildTimeline(store::LoadTracesIndexed(traces));
}

std::vector<const v1::ProcessTimeline*> ByExe(const v1::Timeline& t, const std::string& suffix) {
  std::vector<const v1::ProcessTimeline*> out;
  for (const auto& p : t.processes())
    if (p.exe().size() >= suffix.size() &&
        p.exe().compare(p.exe().size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(&p);
  return out;
}

std::vector<std::string> LoadLines(const v1::ProcessTimeline& p) {
  std::vector<std::string> out;
  for (const auto& e : p.entries()) {
    if (!e.has_load()) continue;
    const auto& l = e.load();
    out.push_back(fmt::format("{} {} -> {} [{}]", v1::LoadReason_Name(l.reason()),
                              l.requested_name(), l.object().path(), l.object().lmid()));
  }
  return out;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

Collector::Collector(const std::string& dir, rlim_t fd_limit) {
  socket = dir + "/c.sock";
  trace = dir + "/t.ldscope";
  err_file = dir + "/collect.err";
  const pid_t parent = getpid();
  pid = fork();
  if (pid == 0) {
    // A test that dies (a failed assertion's abort, a sanitizer's report) takes its
    // collector with it: one left running would hold ctest's output pipe open.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(124);
    if (freopen(err_file.c_str(), "w", stderr) == nullptr) _exit(126);
    if (fd_limit != 0) {
      const rlimit r{fd_limit, fd_limit};
      if (setrlimit(RLIMIT_NOFILE, &r) != 0) _exit(125);
    }
    execl(LDSCOPE_BIN, LDSCOPE_BIN, "collect", "--socket", socket.c_str(), "-o", trace.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 500 && !std::filesystem::exists(socket); ++i) usleep(10000);
}

Collector::~Collector() {
  if (pid > 0) Stop();
}

std::vector<std::string> Collector::Env() const {
  return {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + socket};
}

std::string Collector::Stop() {
  kill(pid, SIGTERM);
  kill(pid, SIGCONT);
  int st = 0;
  waitpid(pid, &st, 0);
  pid = -1;
  return ReadFile(err_file);
}

void ExpectOpenForkOpen(const Proc& r, const v1::Timeline& t, const std::string& lib_a,
                        const std::string& lib_b, const std::string& glibc_version) {
  EXPECT_EQ(r.out, "open " + lib_a + ": ok\nchild\nopen " + lib_b + ": ok\nparent\nopen " + lib_b + ": ok\n");
  EXPECT_EQ(t.problems_size(), 0);
  ASSERT_EQ(t.processes_size(), 2);
  EXPECT_EQ(t.processes(0).start_reason(), v1::START_EXEC);
  EXPECT_EQ(t.processes(1).start_reason(), v1::START_FORK);
  EXPECT_EQ(t.processes(1).parent_stream(), t.processes(0).stream());
  for (const auto& p : t.processes()) {
    if (!glibc_version.empty()) {
      EXPECT_EQ(p.glibc_version(), glibc_version);
    }
    EXPECT_EQ(p.missing_seqs(), 0u);
    EXPECT_TRUE(p.exited());
  }
}

void ExpectGolden(const std::string& file, const std::string& actual) {
  const std::string path = GOLDEN_DIR "/" + file;
  const std::string canonical = Canonicalise(actual);
  if (getenv("LDSCOPE_UPDATE_GOLDEN") != nullptr) WriteFile(path, canonical);
  EXPECT_EQ(canonical, ReadFile(path)) << "golden " << path << " (LDSCOPE_UPDATE_GOLDEN=1 rewrites it)";
}

namespace {
sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  return a;
}
}  // namespace

int ListenSeqpacket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a = UnixAddress(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << path;
  EXPECT_EQ(listen(fd, 16), 0);
  return fd;
}

int ConnectSeqpacket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a = UnixAddress(path);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << path;
  return fd;
}

void SendDatagram(int fd, const std::string& bytes) {
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

std::vector<std::string> ReceiveDatagrams(int lfd, bool* connected) {
  std::vector<std::string> out;
  const int cfd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  *connected = cfd >= 0;
  for (; cfd >= 0;) {
    std::string buf(1 << 16, '\0');
    const ssize_t n = recv(cfd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    out.push_back(buf.substr(0, static_cast<size_t>(n)));
  }
  if (cfd >= 0) close(cfd);
  close(lfd);
  return out;
}

std::string Delimited(const std::string& bytes) {
  std::string out;
  for (uint64_t n = bytes.size();; n >>= 7) {
    out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    if (n < 0x80) break;
  }
  return out + bytes;
}

std::vector<std::string> Pythons(int min_minor, int max_minor) {
  std::vector<std::string> out = {"/usr/bin/python3"};
  const char* root = std::getenv("PYENV_ROOT");
  const char* home = std::getenv("HOME");
  const std::filesystem::path versions =
      std::filesystem::path(root ? root : (home ? std::string(home) + "/.pyenv" : "/nonexistent")) / "versions";
  std::error_code ec;
  std::vector<std::string> found;
  for (const auto& d : std::filesystem::directory_iterator(versions, ec)) {
    std::smatch m;
    const std::string name = d.path().filename().string();
    if (!std::regex_match(name, m, std::regex("3\\.([0-9]+)\\.[0-9]+")) || std::stoi(m[1]) < min_minor ||
        std::stoi(m[1]) > max_minor)
      continue;
    if (std::filesystem::exists(d.path() / "bin/python3")) found.push_back((d.path() / "bin/python3").string());
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
  return out;
}

ipc::ServerStats ServeGoodAndBad(const std::string& dir, const std::vector<std::string>& good,
                                 const std::vector<std::string>& bad) {
  const std::string sock = dir + "/s";
  store::TraceWriter w;
  v1::TraceHeader h;
  h.set_format_version(1);
  EXPECT_TRUE(w.Open(dir + "/t.ldscope", h).ok());
  ipc::Server server;
  server.set_writer(&w);
  EXPECT_TRUE(server.Listen(sock).ok());
  const int g = ConnectSeqpacket(sock);
  for (const auto& d : good) SendDatagram(g, d);
  close(g);
  const int b = ConnectSeqpacket(sock);
  for (const auto& d : bad) SendDatagram(b, d);
  for (int i = 0; i < 50 && server.stats().connections < 2; ++i) server.Poll(100);
  for (int i = 0; i < 50 && server.open_connections() > 0; ++i) server.Poll(100);
  close(b);
  server.Shutdown();
  EXPECT_TRUE(w.Close().ok());
  return server.stats();
}

// See test_support.h.
bool ServerHungUp(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 5000) <= 0) return false;
  char c;
  const ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN);  // EOF, or reset by the server
}

}  // namespace ldscope::testing
