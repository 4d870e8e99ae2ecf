// OpenTelemetry export (`export --otlp`, `collect --otlp`), checked against
// OpenTelemetry's own schema: tests/otlp/receiver.js decodes what ldscope sends with the
// protobufjs root generated from opentelemetry-proto that @opentelemetry/otlp-transformer
// 0.52.1 ships (scripts/setup installs it into the build tree); normalise.js checks the
// ids and parentage and takes out what differs between machines and runs.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "support/test_support.h"

namespace ldscope {
namespace {

namespace fs = std::filesystem;
using testing::RunCmd;

const std::string kModules = OTLP_NODE_MODULES;
const std::string kReceiver = OTLP_TEST_DIR "/receiver.js";
const std::string kNormalise = OTLP_TEST_DIR "/normalise.js";
const std::string kLibA = FIXTURES "/lib/libfix_a.so";
const std::string kLibB = FIXTURES "/lib/libfix_b.so";

// The decoder must be there: a missing one fails the test (scripts/setup installs it).
void RequireDecoder() {
  ASSERT_TRUE(fs::exists(kModules + "/@opentelemetry/otlp-transformer/build/src/generated/root.js"))
      << kModules << " lacks @opentelemetry/otlp-transformer@0.52.1: run scripts/setup";
  ASSERT_EQ(RunCmd({NODE_BIN, "--version"}).code, 0) << "node (" NODE_BIN ") does not run";
}

// receiver.js serving on an ephemeral port of 127.0.0.1, appending to out.
struct Receiver {
  pid_t pid = -1;
  int port = 0;
  std::string out;
  Receiver(const std::string& dir, int status = 200) {
    out = dir + "/received.jsonl";
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      const std::string st = std::to_string(status);
      execl(NODE_BIN, NODE_BIN, kReceiver.c_str(), kModules.c_str(), "serve", out.c_str(), st.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    port = line.empty() ? 0 : std::stoi(line);
  }
  ~Receiver() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// A TCP port on 127.0.0.1 that nothing listens on (bound, then closed).
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// `export --otlp FILE` decoded by receiver.js: its JSON lines.
std::string DecodeFile(const std::string& file) {
  const auto r = RunCmd({NODE_BIN, kReceiver, kModules, "decode-file", file});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

std::string Normalise(const std::vector<std::string>& jsonl, const std::string& scratch) {
  std::vector<std::string> argv = {NODE_BIN, kNormalise, "--keep", "FIXTURES=" FIXTURES,
                                   "--keep", "PYFIXTURES=" PYFIXTURES_DIR, "--keep", "DLPROBE=" DLPROBE,
                                   "--keep", "SCRATCH=" + scratch};
  argv.insert(argv.end(), jsonl.begin(), jsonl.end());
  const auto r = RunCmd(argv);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

// The decoded requests without the line's transport label (received vs. file).
std::string Requests(const std::string& jsonl) {
  return std::regex_replace(jsonl, std::regex("\"contentType\":\"[^\"]*\","), "");
}

// ldscope collect --otlp URL in a child; SIGTERM stops it.
struct OtlpCollector {
  pid_t pid = -1;
  std::string socket, trace, err_file;
  OtlpCollector(const std::string& dir, const std::string& url) {
    socket = dir + "/c.sock";
    trace = dir + "/t.ldscope";
    err_file = dir + "/collect.err";
    pid = fork();
    if (pid == 0) {
      if (freopen(err_file.c_str(), "w", stderr) == nullptr) _exit(126);
      execl(LDSCOPE_BIN, LDSCOPE_BIN, "collect", "--socket", socket.c_str(), "-o", trace.c_str(),
            "--otlp", url.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500 && !fs::exists(socket); ++i) usleep(10000);
  }
  std::vector<std::string> Env() const { return {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_SOCKET=" + socket}; }
  // Stops it; returns its exit status and fills err with what it printed.
  int Stop(std::string* err) {
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    pid = -1;
    *err = testing::ReadFile(err_file);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ~OtlpCollector() {
    if (pid > 0) {
      std::string ignored;
      Stop(&ignored);
    }
  }
};

// Runs argv with dir as its working directory (the traced images record it).
testing::Proc RunInDir(const std::string& dir, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env) {
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  auto r = RunCmd(argv, env);
  fs::current_path(before);
  return r;
}

// dlprobe opens a fixture library and forks; the child opens another, then execs
// dlprobe, which opens that one again: three images (parent, forked child, exec'd).
std::vector<std::string> ForkExecProgram() {
  return {DLPROBE, "open", kLibA, "forkchild", "open", kLibB, "exec", DLPROBE, "open", kLibB};
}

// ldscope's declarations of the OTLP messages (proto/opentelemetry/...) have
// OpenTelemetry's package, message and field names and numbers: each field, encoded
// with ours, decodes to the same field with theirs (tests/otlp/schema_check.js).
TEST(Otlp, DeclarationsMatchOpenTelemetrysSchema) {
  RequireDecoder();
  const auto r = RunCmd({NODE_BIN, OTLP_TEST_DIR "/schema_check.js", kModules, PROTO_DIR});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "23 messages, 77 fields, 4 enums: as in OpenTelemetry's schema\n");
}

// A Python program (import cupy, then torch: a ctypes dlopen, an extension module
// whose dlopen fails on a missing symbol) exported to a live receiver and to a file:
// the same requests either way, and the golden file's spans, events and log records.
TEST(Otlp, ExportDecodedByOpenTelemetrysSchema) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_export");
  const std::string trace = dir + "/t.ldscope";
  const auto run = RunCmd({"/usr/bin/env", "-C", PYFIXTURES_DIR "/app", LDSCOPE_BIN, "run", "-q", "-o",
                           trace, "--", "/usr/bin/python3", "train.py"},
                          {"PYTHONPATH=" FIXTURES "/site-packages"});
  ASSERT_EQ(run.code, 1) << run.err;  // the program's ImportError, as without ldscope
  Receiver rx(dir);
  ASSERT_GT(rx.port, 0);
  const auto post = RunCmd({LDSCOPE_BIN, "export", "--otlp", rx.Url(), trace});
  ASSERT_EQ(post.code, 0) << post.err;
  const std::string received = testing::ReadFile(rx.out);
  ASSERT_NE(received.find("\"path\":\"/v1/traces\",\"contentType\":\"application/x-protobuf\""),
            std::string::npos) << received;
  ASSERT_NE(received.find("\"path\":\"/v1/logs\",\"contentType\":\"application/x-protobuf\""),
            std::string::npos) << received;
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/out.otlp", trace}).code, 0);
  EXPECT_EQ(Requests(DecodeFile(dir + "/out.otlp")), Requests(received));
  testing::ExpectGolden("otlp_python_train.json", Normalise({rx.out}, dir));
}

// collect --otlp streams to a live receiver while the programs run: the spans and log
// records it received are those `export --otlp` gives for the trace it recorded.
TEST(Otlp, CollectStreamsToALiveReceiver) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_collect");
  Receiver rx(dir);
  ASSERT_GT(rx.port, 0);
  OtlpCollector c(dir, rx.Url());
  // A rank of a job in CI: resource attributes process.environment_variable.NAME.
  std::vector<std::string> env = c.Env();
  for (const char* v : {"RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2", "SLURM_PROCID=1", "SLURM_NODEID=0",
                        "OMPI_COMM_WORLD_RANK=1", "GITHUB_RUN_ID=4242", "CI_JOB_ID=77"})
    env.push_back(v);
  const auto r = RunInDir(dir, ForkExecProgram(), env);
  ASSERT_EQ(r.code, 0) << r.err;
  // The spans arrive while the collector still runs (it converts exited images at most
  // once a second; 20 s allows for a loaded machine).
  for (int i = 0; i < 200 && testing::ReadFile(rx.out).find("/v1/traces") == std::string::npos; ++i)
    usleep(100000);
  EXPECT_NE(testing::ReadFile(rx.out).find("/v1/traces"), std::string::npos)
      << "nothing streamed before the collector stopped";
  std::string err;
  ASSERT_EQ(c.Stop(&err), 0) << err;
  EXPECT_TRUE(std::regex_search(err, std::regex("OTLP to " + rx.Url() +
                                                ": [1-9][0-9]* spans, 0 log records sent\\)?\n")))
      << err;
  EXPECT_EQ(err.find("log records dropped"), std::string::npos) << err;
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/out.otlp", c.trace}).code, 0);
  testing::WriteFile(dir + "/exported.jsonl", DecodeFile(dir + "/out.otlp"));
  const std::string streamed = Normalise({rx.out}, dir);
  EXPECT_EQ(streamed, Normalise({dir + "/exported.jsonl"}, dir));
  testing::ExpectGolden("otlp_collect_fork_exec.json", streamed);
}

// A dead endpoint (a closed port): the traced program runs as without --otlp, the trace
// is complete, and the spans that could not be sent are counted as dropped.
TEST(Otlp, DeadEndpointDropsAndCounts) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_dead");
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort());
  const auto bare = RunInDir(dir, ForkExecProgram(), {});
  OtlpCollector c(dir, url);
  const auto r = RunInDir(dir, ForkExecProgram(), c.Env());
  EXPECT_EQ(r.code, bare.code);
  EXPECT_EQ(r.out, bare.out);
  std::string err;
  ASSERT_EQ(c.Stop(&err), 0) << err;
  // As many spans dropped as the export of the trace holds.
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/out.otlp", c.trace}).code, 0);
  const std::string decoded = DecodeFile(dir + "/out.otlp");
  size_t spans = 0;
  for (size_t at = 0; (at = decoded.find("\"spanId\":", at)) != std::string::npos; ++at) ++spans;
  ASSERT_GT(spans, 0u);
  EXPECT_NE(err.find("OTLP to " + url + ": 0 spans, 0 log records sent; " + std::to_string(spans) +
                     " spans, 0 log records dropped ("),
            std::string::npos) << err;
  EXPECT_NE(err.find("cannot connect to 127.0.0.1:"), std::string::npos) << err;
  EXPECT_NE(err.find("Connection refused"), std::string::npos) << err;
  // The trace itself is whole: three images, nothing lost; the two exec'd ones exited
  // (the forked child ended by exec).
  const v1::Timeline t = testing::TimelineOf({c.trace});
  ASSERT_EQ(t.processes_size(), 3);
  for (const auto& p : t.processes()) {
    EXPECT_EQ(p.exited(), p.start_reason() == v1::START_EXEC) << p.pid() << " " << p.start_reason();
    EXPECT_EQ(p.dropped(), 0u);
    EXPECT_EQ(p.missing_seqs(), 0u);
  }
}

// Bad URLs are usage errors (status 2); an endpoint that cannot be reached or answers
// other than 2xx fails the export (status 4), saying why.
TEST(Otlp, ErrorsAreClear) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_errors");
  const std::string trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibA}).code, 0);
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::string closed = "http://127.0.0.1:" + std::to_string(ClosedPort());
  Receiver failing(dir, 503);
  const std::vector<Case> cases = {
      {{"export", "--otlp", "https://127.0.0.1:4318", trace}, 2,
       "ldscope: export --otlp: 'https://127.0.0.1:4318': https is not supported (ldscope speaks "
       "plain HTTP only); send to a local OpenTelemetry Collector's http://HOST:4318 and let it "
       "forward over TLS\n"},
      {{"export", "--otlp", "http://127.0.0.1", trace}, 2,
       "ldscope: export --otlp: 'http://127.0.0.1': no port (the OpenTelemetry Collector's "
       "OTLP/HTTP port is usually 4318: http://127.0.0.1:4318)\n"},
      {{"export", "--otlp", "http://127.0.0.1:99999", trace}, 2,
       "ldscope: export --otlp: 'http://127.0.0.1:99999': bad port '99999'\n"},
      {{"export", "--otlp", "grpc://127.0.0.1:4317", trace}, 2,
       "ldscope: export --otlp: 'grpc://127.0.0.1:4317': only http:// URLs are supported\n"},
      {{"export", "--otlp", "http://otel-collector.invalid:4318", trace}, 4,
       "ldscope: export --otlp: http://otel-collector.invalid:4318/v1/traces: cannot resolve host "
       "'otel-collector.invalid': ldscope takes an IP address, localhost or a name from /etc/hosts "
       "(it has no DNS client)\n"
       "ldscope: export --otlp: http://otel-collector.invalid:4318/v1/logs: cannot resolve host "
       "'otel-collector.invalid': ldscope takes an IP address, localhost or a name from /etc/hosts "
       "(it has no DNS client)\n"},
      {{"export", "--otlp", closed, trace}, 4,
       "ldscope: export --otlp: " + closed + "/v1/traces: cannot connect to " + closed.substr(7) +
           ": Connection refused\n"
           "ldscope: export --otlp: " + closed + "/v1/logs: cannot connect to " + closed.substr(7) +
           ": Connection refused\n"},
      {{"export", "--otlp", failing.Url() + "/otlp/", trace}, 4,
       "ldscope: export --otlp: " + failing.Url() + "/otlp/v1/traces: HTTP 503\n"
       "ldscope: export --otlp: " + failing.Url() + "/otlp/v1/logs: HTTP 503\n"},
      {{"export", "--otlp", "127.0.0.1:4318", trace}, 2,
       "ldscope: export --otlp: '127.0.0.1:4318' looks like HOST:PORT: write "
       "http://127.0.0.1:4318 for an endpoint, or ./127.0.0.1:4318 for a file\n"},
      {{"export", trace}, 2,
       "ldscope: export: say which format: --chrome -o FILE, or --otlp FILE|http://HOST:PORT\n"},
      {{"export", "--chrome", "--otlp", dir + "/x", trace}, 2,
       "ldscope: export: say which format: --chrome -o FILE, or --otlp FILE|http://HOST:PORT\n"},
      {{"export", "--otlp", trace, trace}, 4, ""},  // would overwrite its input
      {{"export", "--otlp", dir + "/x.otlp", dir + "/missing.ldscope"}, 2, ""},
      {{"collect", "--socket", dir + "/s", "-o", dir + "/c.ldscope", "--otlp", "https://h:1"}, 2,
       "ldscope: collect --otlp: 'https://h:1': https is not supported (ldscope speaks plain HTTP "
       "only); send to a local OpenTelemetry Collector's http://HOST:4318 and let it forward over "
       "TLS\n"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {LDSCOPE_BIN};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = RunCmd(argv);
    SCOPED_TRACE(c.args.back() + " " + c.args[c.args.size() - 2]);
    EXPECT_EQ(r.code, c.code) << r.err;
    if (!c.message.empty()) {
      EXPECT_EQ(r.err, c.message);
    }
  }
  // The failing receiver did get (and decode) both requests.
  const std::string got = testing::ReadFile(failing.out);
  EXPECT_NE(got.find("\"path\":\"/otlp/v1/traces\""), std::string::npos) << got;
  EXPECT_NE(got.find("\"path\":\"/otlp/v1/logs\""), std::string::npos) << got;
  EXPECT_EQ(testing::ReadFile(trace).empty(), false);
  const auto help = RunCmd({LDSCOPE_BIN, "export", "--help"});
  EXPECT_NE(help.out.find("--otlp"), std::string::npos) << help.out;
  const auto chelp = RunCmd({LDSCOPE_BIN, "collect", "--help"});
  EXPECT_NE(chelp.out.find("--otlp"), std::string::npos) << chelp.out;
}

}  // namespace
}  // namespace ldscope
