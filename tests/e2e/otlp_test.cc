// OpenTelemetry export (`export --otlp`, `collect --otlp`), checked against
// OpenTelemetry's own schema: tests/otlp/receiver.js decodes what ldscope sends with the
// protobufjs root generated from opentelemetry-proto that @opentelemetry/otlp-transformer
// 0.52.1 ships (scripts/setup installs it into the build tree); normalise.js checks the
// ids and parentage and takes out what differs between machines and runs.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

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

// A node script serving on an ephemeral port of 127.0.0.1 (its first line of output).
struct NodeServer {
  pid_t pid = -1;
  int port = 0;
  NodeServer(const std::string& script, const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      std::vector<const char*> argv = {NODE_BIN, script.c_str()};
      for (const auto& a : args) argv.push_back(a.c_str());
      argv.push_back(nullptr);
      execv(NODE_BIN, const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    port = line.empty() ? 0 : std::stoi(line);
  }
  ~NodeServer() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

// receiver.js serving on an ephemeral port of 127.0.0.1, appending to out (and the
// requests' transport to out.meta).
struct Receiver : NodeServer {
  std::string out;
  Receiver(const std::string& dir, const std::vector<std::string>& options, const std::string& name = "received")
      : NodeServer(kReceiver,
                   [&] {
                     std::vector<std::string> a = {kModules, "serve", dir + "/" + name + ".jsonl"};
                     a.insert(a.end(), options.begin(), options.end());
                     return a;
                   }()),
        out(dir + "/" + name + ".jsonl") {}
  Receiver(const std::string& dir, int status = 200) : Receiver(dir, {std::to_string(status)}) {}
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port); }
  std::string Meta() const { return testing::ReadFile(out + ".meta"); }
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

// `export --otlp DIR`'s OTLP/JSON Lines files read back by receiver.js: its JSON lines.
std::string ReadJsonl(const std::string& dir) {
  const auto r = RunCmd({NODE_BIN, kReceiver, kModules, "read-jsonl", dir + "/traces.jsonl", dir + "/logs.jsonl"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
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
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/out", trace}).code, 0);
  EXPECT_EQ(Requests(ReadJsonl(dir + "/out")), Requests(received));
  testing::ExpectGolden("otlp_python_train.json", Normalise({rx.out}, dir));
}

// `export --otlp DIR` writes the specification's file format (OTLP/JSON Lines, one
// signal per file: what the Collector's otlpjsonfile receiver reads), and every line
// reads back through OpenTelemetry's schema as written: the spans and log records of
// the traced program are the golden's, as when sent over HTTP. --otlp-traces and
// --otlp-logs write the same files under names of one's own.
TEST(Otlp, FilesAreOtlpJsonLines) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_files");
  const std::string trace = dir + "/t.ldscope";
  const auto run = RunCmd({"/usr/bin/env", "-C", PYFIXTURES_DIR "/app", LDSCOPE_BIN, "run", "-q", "-o", trace, "--",
                           "/usr/bin/python3", "train.py"},
                          {"PYTHONPATH=" FIXTURES "/site-packages"});
  ASSERT_EQ(run.code, 1) << run.err;
  const auto r = RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/otlp", trace});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
  const std::string traces = testing::ReadFile(dir + "/otlp/traces.jsonl");
  const std::string logs = testing::ReadFile(dir + "/otlp/logs.jsonl");
  // One request per line, each line one JSON object ending in \n.
  for (const std::string* f : {&traces, &logs}) {
    ASSERT_FALSE(f->empty());
    EXPECT_EQ(std::count(f->begin(), f->end(), '\n'), 1);
    EXPECT_EQ(f->back(), '\n');
    EXPECT_EQ(f->front(), '{');
  }
  EXPECT_EQ(traces.rfind("{\"resourceSpans\":[{\"resource\":{\"attributes\":[", 0), 0u) << traces.substr(0, 200);
  EXPECT_EQ(logs.rfind("{\"resourceLogs\":[{\"resource\":{\"attributes\":[", 0), 0u) << logs.substr(0, 200);
  // The encoding's rules, as the text shows them: hex ids, enums as integers, 64-bit
  // integers as strings.
  EXPECT_TRUE(std::regex_search(traces, std::regex("\"traceId\":\"[0-9a-f]{32}\",\"spanId\":\"[0-9a-f]{16}\"")));
  EXPECT_TRUE(std::regex_search(traces, std::regex("\"kind\":1,\"startTimeUnixNano\":\"[0-9]{19}\"")));
  EXPECT_TRUE(std::regex_search(traces, std::regex("\"intValue\":\"[0-9]+\"")));
  EXPECT_TRUE(std::regex_search(traces, std::regex("\"status\":\\{\"message\":\"[^\"]*\",\"code\":2\\}")))
      << "a failed import's status, ERROR as 2";
  EXPECT_TRUE(std::regex_search(logs, std::regex("\"severityNumber\":(9|13|17),\"severityText\":\"")));
  EXPECT_TRUE(std::regex_search(logs, std::regex("\"traceId\":\"[0-9a-f]{32}\",\"spanId\":\"[0-9a-f]{16}\"")));
  const std::string read = ReadJsonl(dir + "/otlp");
  testing::WriteFile(dir + "/read.jsonl", read);
  testing::ExpectGolden("otlp_python_train.json", Normalise({dir + "/read.jsonl"}, dir));
  // Files of one's own naming: the same lines.
  const auto named =
      RunCmd({LDSCOPE_BIN, "export", "--otlp-traces", dir + "/t.jsonl", "--otlp-logs", dir + "/l.jsonl", trace});
  ASSERT_EQ(named.code, 0) << named.err;
  EXPECT_EQ(testing::ReadFile(dir + "/t.jsonl"), traces);
  EXPECT_EQ(testing::ReadFile(dir + "/l.jsonl"), logs);
  const auto only_logs = RunCmd({LDSCOPE_BIN, "export", "--otlp-logs", "-", trace});
  ASSERT_EQ(only_logs.code, 0) << only_logs.err;
  EXPECT_EQ(only_logs.out, logs);
}

// The reader is strict: a line in protobuf's plain JSON mapping (base64 ids, enums by
// name) or with an uppercase id does not read back as written.
TEST(Otlp, ReaderRejectsOtherEncodings) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_files_strict");
  const std::string trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibA}).code, 0);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/good", trace}).code, 0);
  const std::string good = testing::ReadFile(dir + "/good/traces.jsonl");
  EXPECT_EQ(testing::ReadFile(dir + "/good/logs.jsonl"), "") << "no findings: no request";
  ASSERT_NE(good.find("\"kind\":1"), std::string::npos);
  const std::smatch id = [&] {
    std::smatch m;
    std::regex_search(good, m, std::regex("\"spanId\":\"([0-9a-f]{16})\""));
    return m;
  }();
  ASSERT_FALSE(id.empty());
  std::string upper = id[1].str();
  for (auto& c : upper) c = static_cast<char>(toupper(c));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"\"kind\":1", "\"kind\":\"SPAN_KIND_INTERNAL\""},
      {id[1].str(), upper},
      {id[1].str(), "AAECAwQFBgc="},
      {"\"startTimeUnixNano\":\"", "\"startTimeUnixNanos\":\""},
  };
  for (const auto& [from, to] : bad) {
    fs::create_directories(dir + "/bad");
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    testing::WriteFile(dir + "/bad/traces.jsonl", text);
    testing::WriteFile(dir + "/bad/logs.jsonl", "");
    const auto r =
        RunCmd({NODE_BIN, kReceiver, kModules, "read-jsonl", dir + "/bad/traces.jsonl", dir + "/bad/logs.jsonl"});
    EXPECT_EQ(r.code, 1) << to;
    EXPECT_NE(r.err.find(dir + "/bad/traces.jsonl:1: "), std::string::npos) << r.err;
  }
}

// --otlp takes a directory: a file, or a name that looks like one, is refused (status
// 2) with what to use instead, before anything is written; a directory that cannot be
// created fails the export (status 4).
TEST(Otlp, FileWhereADirectoryIsMeantIsRefused) {
  const std::string dir = testing::ScratchDir("otlp_files_refused");
  const std::string trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibA}).code, 0);
  testing::WriteFile(dir + "/old.otlp", "precious");
  const std::string hint =
      "--otlp DIR writes DIR/traces.jsonl and DIR/logs.jsonl (OTLP/JSON Lines); to name the files "
      "yourself, use --otlp-traces FILE --otlp-logs FILE\n";
  auto r = RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/old.otlp", trace});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "ldscope: export --otlp: '" + dir + "/old.otlp' is not a directory: " + hint);
  EXPECT_EQ(testing::ReadFile(dir + "/old.otlp"), "precious");
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/new.pb", trace});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "ldscope: export --otlp: '" + dir +
                       "/new.pb' looks like a file name, and --otlp "
                       "takes a directory: " +
                       hint);
  EXPECT_FALSE(fs::exists(dir + "/new.pb"));
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/no/such/dir", trace});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err,
            "ldscope: export --otlp: cannot create the directory " + dir + "/no/such/dir: No such file or directory\n");
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/new", trace});
  EXPECT_EQ(r.code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(stat((dir + "/new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES reach the files too: on every resource,
// replacing ldscope's service.name; a malformed OTEL_RESOURCE_ATTRIBUTES is reported and
// ignored whole, as the specification says.
TEST(Otlp, ResourceVariablesInFiles) {
  const std::string dir = testing::ScratchDir("otlp_files_resource");
  const std::string trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", kLibA}).code, 0);
  auto r = RunCmd({LDSCOPE_BIN, "export", "--otlp-traces", "-", trace},
                  {"OTEL_SERVICE_NAME=loader-check", "OTEL_RESOURCE_ATTRIBUTES=team=ml, site=a%3Db"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string attrs =
      "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"loader-check\"}},"
      "{\"key\":\"host.name\",";
  EXPECT_NE(r.out.find(attrs), std::string::npos) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("{\"key\":\"team\",\"value\":{\"stringValue\":\"ml\"}},"
                       "{\"key\":\"site\",\"value\":{\"stringValue\":\"a=b\"}}]"),
            std::string::npos)
      << r.out.substr(0, 1500);
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp-traces", "-", trace},
             {"OTEL_RESOURCE_ATTRIBUTES=team=ml,broken,site=%zz"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err,
            "ldscope: OTEL_RESOURCE_ATTRIBUTES: 'broken' is not KEY=VALUE (the value "
            "percent-encoded): the variable is ignored\n");
  EXPECT_EQ(r.out.find("\"team\""), std::string::npos);
  EXPECT_NE(r.out.find("{\"key\":\"service.name\",\"value\":{\"stringValue\":\"dlprobe\"}}"), std::string::npos);
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
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/out", c.trace}).code, 0);
  testing::WriteFile(dir + "/exported.jsonl", ReadJsonl(dir + "/out"));
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
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--otlp", dir + "/out", c.trace}).code, 0);
  const std::string decoded = ReadJsonl(dir + "/out");
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
      {{"export", "--otlp", "http://127.0.0.1:", trace},
       2,
       "ldscope: export --otlp: 'http://127.0.0.1:': bad port ''\n"},
      {{"export", "--otlp", "http://127.0.0.1:99999", trace},
       2,
       "ldscope: export --otlp: 'http://127.0.0.1:99999': bad port '99999'\n"},
      {{"export", "--otlp", "grpc://127.0.0.1:4317", trace},
       2,
       "ldscope: export --otlp: 'grpc://127.0.0.1:4317': only http:// and https:// URLs are "
       "supported (OTLP/HTTP)\n"},
      // Refused connections are retried within OTEL_EXPORTER_OTLP_TIMEOUT (1.2 s here):
      // at once, then after 0.5 s; the next wait (1 s) would pass the timeout.
      {{"export", "--otlp", closed, trace},
       4,
       "ldscope: export --otlp: " + closed + "/v1/traces: cannot connect to " + closed.substr(7) +
           ": Connection refused (2 attempts in 1200 ms, OTEL_EXPORTER_OTLP_TIMEOUT)\n"
           "ldscope: export --otlp: " +
           closed + "/v1/logs: cannot connect to " + closed.substr(7) +
           ": Connection refused (2 attempts in 1200 ms, OTEL_EXPORTER_OTLP_TIMEOUT)\n"},
      {{"export", "--otlp", failing.Url() + "/otlp/", trace},
       4,
       "ldscope: export --otlp: " + failing.Url() +
           "/otlp/v1/traces: HTTP 503 (2 attempts in 1200 ms, "
           "OTEL_EXPORTER_OTLP_TIMEOUT)\n"
           "ldscope: export --otlp: " +
           failing.Url() +
           "/otlp/v1/logs: HTTP 503 (2 attempts in 1200 ms, "
           "OTEL_EXPORTER_OTLP_TIMEOUT)\n"},
      {{"export", "--otlp", "127.0.0.1:4318", trace},
       2,
       "ldscope: export --otlp: '127.0.0.1:4318' looks like HOST:PORT: write "
       "http://127.0.0.1:4318 for an endpoint, or ./127.0.0.1:4318 for a directory\n"},
      {{"export", trace},
       2,
       "ldscope: export: say which format: --chrome -o FILE, or --otlp DIR|http://HOST:PORT "
       "(or --otlp-traces FILE --otlp-logs FILE)\n"},
      {{"export", "--chrome", "--otlp", dir + "/x", trace},
       2,
       "ldscope: export: say which format: --chrome -o FILE, or --otlp DIR|http://HOST:PORT "
       "(or --otlp-traces FILE --otlp-logs FILE)\n"},
      {{"export", "--otlp-traces", trace, trace}, 4, ""},  // would overwrite its input
      {{"export", "--otlp-traces", dir + "/o", "--otlp-logs", dir + "/o", trace},
       4,
       "ldscope: the outputs --otlp-traces " + dir + "/o and --otlp-logs " + dir + "/o are the same file\n"},
      {{"export", "--otlp", dir + "/x", dir + "/missing.ldscope"}, 2, ""},
      {{"collect", "--socket", dir + "/s", "-o", dir + "/c.ldscope", "--otlp", "ftp://h:1"},
       2,
       "ldscope: collect --otlp: 'ftp://h:1': only http:// and https:// URLs are supported "
       "(OTLP/HTTP)\n"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {LDSCOPE_BIN};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = RunCmd(argv, {"OTEL_EXPORTER_OTLP_TIMEOUT=1200"});
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
}

// The help names the options.
TEST(Otlp, HelpNamesTheOptions) {
  const auto help = RunCmd({LDSCOPE_BIN, "export", "--help"});
  for (const char* option : {"--otlp ", "--otlp-http", "--otlp-traces", "--otlp-logs"})
    EXPECT_NE(help.out.find(option), std::string::npos) << option << "\n" << help.out;
  const auto chelp = RunCmd({LDSCOPE_BIN, "collect", "--help"});
  EXPECT_NE(chelp.out.find("--otlp"), std::string::npos) << chelp.out;
}

// One line of receiver.js's transport log, read with regexes (node writes the keys in
// this order): the path, status, connection number, time and a header.
struct Sent {
  std::string path;
  int status = 0, connection = 0;
  long ms = 0;
  std::string line;
  std::string Header(const std::string& name) const {
    std::smatch m;
    return std::regex_search(line, m, std::regex("\"" + name + "\":\"([^\"]*)\"")) ? m[1].str() : "<none>";
  }
};
std::vector<Sent> SentRequests(const std::string& meta) {
  std::vector<Sent> out;
  std::istringstream in(meta);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"tlsError\":", 0) == 0) continue;  // handshakes that failed
    std::smatch m;
    if (!std::regex_search(line, m,
                           std::regex("^\\{\"path\":\"([^\"]*)\",\"status\":([0-9]+),\"connection\":([0-9]+),"
                                      "\"ms\":([0-9]+),"))) {
      out.push_back({"<" + line + ">", 0, 0, 0, line});
      continue;
    }
    out.push_back({m[1].str(), std::stoi(m[2].str()), std::stoi(m[3].str()), std::stol(m[4].str()), line});
  }
  return out;
}

// A trace with findings (train.py's), recorded once for the HTTP tests.
std::string TrainTrace(const std::string& dir) {
  const std::string trace = dir + "/t.ldscope";
  const auto run = RunCmd({"/usr/bin/env", "-C", PYFIXTURES_DIR "/app", LDSCOPE_BIN, "run", "-q", "-o", trace, "--",
                           "/usr/bin/python3", "train.py"},
                          {"PYTHONPATH=" FIXTURES "/site-packages"});
  EXPECT_EQ(run.code, 1) << run.err;
  return trace;
}

// `export --otlp-http` as OpenTelemetry's exporters are configured: the endpoint (a host
// name that only the cluster's DNS knows, here a test DNS server) with /v1/traces and
// /v1/logs appended to its path, the headers (percent-decoded; the signal's own
// replacing the general ones), gzip, the service name and resource attributes on every
// resource; a 503 with Retry-After: 1 is retried after that second, on the same
// connection as every other request (keep-alive); the User-Agent names ldscope.
TEST(OtlpHttp, ExportHonoursOpenTelemetrysVariables) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_http_env");
  const std::string trace = TrainTrace(dir);
  Receiver rx(dir, {"--fail-first", "1", "--retry-after", "1"});
  ASSERT_GT(rx.port, 0);
  NodeServer dns(OTLP_TEST_DIR "/dns.js", {"otel-collector.test=127.0.0.1"});
  ASSERT_GT(dns.port, 0);
  const std::string port = std::to_string(rx.port);
  const std::vector<std::string> env = {"LDSCOPE_DNS_SERVERS=127.0.0.1:" + std::to_string(dns.port),
                                        "OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector.test:" + port + "/base/",
                                        "OTEL_EXPORTER_OTLP_HEADERS=api-key=secret%20value, x-tenant=a",
                                        "OTEL_EXPORTER_OTLP_LOGS_HEADERS=x-tenant=b",
                                        "OTEL_EXPORTER_OTLP_COMPRESSION=gzip",
                                        "OTEL_SERVICE_NAME=train-job",
                                        "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=ci%2Cstaging,team=ml"};
  const auto r = RunCmd({LDSCOPE_BIN, "export", "--otlp-http", trace}, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<Sent> sent = SentRequests(rx.Meta());
  ASSERT_EQ(sent.size(), 3u) << rx.Meta();
  EXPECT_EQ(sent[0].path, "/base/v1/traces");
  EXPECT_EQ(sent[0].status, 503);
  EXPECT_EQ(sent[1].path, "/base/v1/traces");
  EXPECT_EQ(sent[1].status, 200);
  EXPECT_GE(sent[1].ms - sent[0].ms, 950) << "Retry-After: 1 was not waited for";
  EXPECT_EQ(sent[2].path, "/base/v1/logs");
  EXPECT_EQ(sent[2].status, 200);
  for (const auto& s : sent) {
    EXPECT_EQ(s.connection, 1) << "a new connection: " << s.line;
    EXPECT_EQ(s.Header("host"), "otel-collector.test:" + port);
    EXPECT_TRUE(std::regex_match(s.Header("user-agent"), std::regex("ldscope/[0-9]+\\.[0-9]+\\.[0-9]+"))) << s.line;
    EXPECT_EQ(s.Header("content-type"), "application/x-protobuf");
    EXPECT_EQ(s.Header("content-encoding"), "gzip");
    EXPECT_EQ(s.Header("api-key"), "secret value");
  }
  EXPECT_EQ(sent[1].Header("x-tenant"), "a");
  EXPECT_EQ(sent[2].Header("x-tenant"), "b");
  // The requests decoded (gzip undone) by OpenTelemetry's schema: every resource has
  // the service name and attributes.
  const std::string got = testing::ReadFile(rx.out);
  EXPECT_EQ(got.find("\"error\""), std::string::npos) << got;
  size_t resources = 0, named = 0;
  for (size_t at = 0; (at = got.find("\"resource\":{\"attributes\":[", at)) != std::string::npos; ++at) ++resources;
  const std::string service = "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"train-job\"}}";
  for (size_t at = 0; (at = got.find(service, at)) != std::string::npos; ++at) ++named;
  EXPECT_GT(resources, 1u);
  EXPECT_EQ(named, resources) << got.substr(0, 2000);
  EXPECT_NE(got.find("{\"key\":\"deployment.environment\",\"value\":{\"stringValue\":\"ci,staging\"}}"),
            std::string::npos);
  EXPECT_NE(got.find("{\"key\":\"team\",\"value\":{\"stringValue\":\"ml\"}}"), std::string::npos);
  EXPECT_EQ(got.find("{\"key\":\"service.name\",\"value\":{\"stringValue\":\"python3"), std::string::npos)
      << "ldscope's own service.name left";
}

// The signals' own endpoints are used as they are (no /v1/... appended; no path is /);
// localhost resolves; a name the DNS does not know fails at once (no retry), saying so.
TEST(OtlpHttp, SignalEndpointsAndUnknownNames) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_http_signal");
  const std::string trace = TrainTrace(dir);
  Receiver rx(dir);
  ASSERT_GT(rx.port, 0);
  const std::string port = std::to_string(rx.port);
  auto r = RunCmd({LDSCOPE_BIN, "export", "--otlp-http", trace},
                  {"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1/unused",
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:" + port + "/custom/traces",
                   "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http://localhost:" + port});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::vector<Sent> sent = SentRequests(rx.Meta());
  ASSERT_EQ(sent.size(), 2u) << rx.Meta();
  EXPECT_EQ(sent[0].path, "/custom/traces");
  EXPECT_EQ(sent[1].path, "/");
  NodeServer dns(OTLP_TEST_DIR "/dns.js", {"otel-collector.test=127.0.0.1"});
  ASSERT_GT(dns.port, 0);
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp", "http://missing.test:4318", trace},
             {"LDSCOPE_DNS_SERVERS=127.0.0.1:" + std::to_string(dns.port)});
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err,
            "ldscope: export --otlp: http://missing.test:4318/v1/traces: cannot resolve host 'missing.test': "
            "Domain name not found\n"
            "ldscope: export --otlp: http://missing.test:4318/v1/logs: cannot resolve host 'missing.test': "
            "Domain name not found\n");
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp-http", trace}, {"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "ldscope: export --otlp: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: ldscope sends OTLP/HTTP "
            "protobuf only (http/protobuf)\n");
}

// https:// with a CA of the test's own (openssl CLI): trusted when
// OTEL_EXPORTER_OTLP_CERTIFICATE names it; without it (the system's CAs) and for a name
// the certificate does not carry, the export fails, saying why.
TEST(OtlpHttp, TlsVerifiesTheServer) {
  RequireDecoder();
  const std::string dir = testing::ScratchDir("otlp_https");
  const std::string trace = TrainTrace(dir);
  testing::WriteFile(dir + "/san.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  const std::string ec = "ec:" + dir + "/ecparam.pem";
  const std::string kOpenssl = "/usr/bin/openssl";  // Debian's openssl (scripts/setup)
  for (const auto& cmd : std::vector<std::vector<std::string>>{
           {kOpenssl, "ecparam", "-name", "prime256v1", "-out", dir + "/ecparam.pem"},
           {kOpenssl, "req", "-x509", "-newkey", ec, "-nodes", "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem",
            "-subj", "/CN=ldscope test CA", "-days", "2"},
           {kOpenssl, "req", "-newkey", ec, "-nodes", "-keyout", dir + "/server.key", "-out", dir + "/server.csr",
            "-subj", "/CN=localhost"},
           {kOpenssl, "x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key",
            "-CAcreateserial", "-out", dir + "/server.pem", "-days", "2", "-extfile", dir + "/san.ext"}}) {
    const auto r = RunCmd(cmd);
    ASSERT_EQ(r.code, 0) << cmd[1] << ": " << r.err;
  }
  Receiver rx(dir, {"--tls", dir + "/server.key", dir + "/server.pem"});
  ASSERT_GT(rx.port, 0);
  const std::string url = "https://localhost:" + std::to_string(rx.port);
  auto r = RunCmd({LDSCOPE_BIN, "export", "--otlp-http", trace},
                  {"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "OTEL_EXPORTER_OTLP_CERTIFICATE=" + dir + "/ca.pem"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string got = testing::ReadFile(rx.out);
  EXPECT_NE(got.find("{\"path\":\"/v1/traces\",\"contentType\":\"application/x-protobuf\","), std::string::npos) << got;
  EXPECT_NE(got.find("{\"path\":\"/v1/logs\",\"contentType\":\"application/x-protobuf\","), std::string::npos) << got;
  EXPECT_NE(got.find("\"resourceSpans\":[{"), std::string::npos);
  const std::vector<Sent> sent = SentRequests(rx.Meta());
  ASSERT_EQ(sent.size(), 2u) << rx.Meta();
  EXPECT_EQ(sent[1].connection, 1) << "keep-alive over TLS";
  // The system's CAs do not include the test's.
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp", url, trace});
  EXPECT_EQ(r.code, 4);
  const std::string untrusted = ": TLS with localhost:" + std::to_string(rx.port) +
                                ": the server's certificate is not trusted: unable to get local issuer certificate "
                                "(trusted: the system's CA certificates; OTEL_EXPORTER_OTLP_CERTIFICATE names a CA "
                                "file to trust instead)\n";
  EXPECT_EQ(r.err, "ldscope: export --otlp: " + url + "/v1/traces" + untrusted + "ldscope: export --otlp: " + url +
                       "/v1/logs" + untrusted);
  // A name the certificate does not carry.
  NodeServer dns(OTLP_TEST_DIR "/dns.js", {"otel.test=127.0.0.1"});
  ASSERT_GT(dns.port, 0);
  const std::string other = "https://otel.test:" + std::to_string(rx.port);
  r = RunCmd({LDSCOPE_BIN, "export", "--otlp", other, trace},
             {"LDSCOPE_DNS_SERVERS=127.0.0.1:" + std::to_string(dns.port),
              "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE=" + dir + "/ca.pem",
              "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE=" + dir + "/ca.pem"});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find(other + "/v1/traces: TLS with otel.test:" + std::to_string(rx.port) +
                       ": the server's certificate is not trusted: hostname mismatch (trusted: the CA "
                       "certificates in " +
                       dir + "/ca.pem)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(SentRequests(rx.Meta()).size(), 2u) << "nothing sent without a trusted server";
  // The receiver logs a handshake's end on its own time: wait for it (at most 5 s).
  std::string meta;
  size_t refused = 0;
  for (int i = 0; i < 50 && refused < 4; ++i) {
    if (i > 0) usleep(100000);
    meta = rx.Meta();
    refused = 0;
    for (size_t at = 0; (at = meta.find("{\"tlsError\":", at)) != std::string::npos; ++at) ++refused;
  }
  EXPECT_EQ(refused, 4u) << "four handshakes ended by ldscope: " << meta;
}

}  // namespace
}  // namespace ldscope
