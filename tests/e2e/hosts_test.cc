// `ldscope report` over traces of several hosts: ranks of one program traced on three
// "hosts" (LDSCOPE_HOST names each node's traces, as a job script would), with
// `ldscope run` per host and with LDSCOPE_DIR per node, reported together: the hosts and
// ranks whose libnccl.so.2 differs from the others', per-host findings carrying their
// host, and the usual exit statuses. Whole text and JSON goldens.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <regex>

#include <fmt/format.h>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kFx = FIXTURES;
const std::string kSib = kFx + "/classes/siblings";
const std::string kOld = kSib + "/old/libnccl.so.2.18.1";

// Processes started together connect in any order: their streams are numbered so.
std::string Streams(const std::string& s) {
  return std::regex_replace(s, std::regex("\"stream\": [0-9]+"), "\"stream\": 0");
}

// Ranks of `dlprobe open libnccl.so.2` on one host, traced by `ldscope run` into
// dir/HOST/t.ldscope; preload[i]: rank i's LD_PRELOAD ("" for none); args[i], when
// given: more of rank i's arguments (shell words).
void TraceHost(const std::string& dir, const std::string& host, int first_rank, const std::vector<std::string>& preload,
               const std::vector<std::string>& args = {}) {
  std::string script;
  for (size_t i = 0; i < preload.size(); ++i)
    script +=
        fmt::format("RANK={} LOCAL_RANK={} WORLD_SIZE=6 {}$0 open libnccl.so.2 {}& ", first_rank + i, i,
                    preload[i].empty() ? "" : "LD_PRELOAD=" + preload[i] + " ", i < args.size() ? args[i] + " " : "");
  script += "wait";
  ASSERT_EQ(mkdir((dir + "/" + host).c_str(), 0700), 0);
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/" + host + "/t.ldscope", "--",
                         "/bin/sh", "-c", script, DLPROBE},
                        {"LDSCOPE_HOST=" + host, "LD_LIBRARY_PATH=" + kSib + "/nccl/lib"});
  ASSERT_EQ(r.code, 0) << r.err;
}

// `report` in text and JSON (same exit status), as one golden text.
void ExpectReports(const std::string& name, const std::vector<std::string>& inputs, int code) {
  std::vector<std::string> text = {LDSCOPE_BIN, "report"}, json = {LDSCOPE_BIN, "report", "--format", "json"};
  text.insert(text.end(), inputs.begin(), inputs.end());
  json.insert(json.end(), inputs.begin(), inputs.end());
  const auto t = RunCmd(text), j = RunCmd(json);
  EXPECT_EQ(t.code, code) << t.err;
  EXPECT_EQ(j.code, code) << j.err;
  EXPECT_EQ(t.err, j.err);
  testing::ExpectGolden("hosts_" + name + ".txt",
                        Streams(fmt::format("== exit {}\n== stderr\n{}== stdout\n{}", t.code, t.err, t.out)));
  testing::ExpectGolden("hosts_" + name + ".json", Streams(j.out));
}

// hostC's rank 5 preloads an old NCCL: its siblings on hostC disagree (the per-host
// finding, with its host) and it differs from the five others (the cross-host finding).
TEST(Hosts, OneRankDiffers) {
  const auto dir = testing::ScratchDir("hosts_one_rank");
  TraceHost(dir, "hostA", 0, {"", ""});
  TraceHost(dir, "hostB", 2, {"", ""});
  TraceHost(dir, "hostC", 4, {"", kOld});
  ExpectReports("one_rank", {dir + "/hostA/", dir + "/hostB/", dir + "/hostC/"}, 0);
  // --fail-on names the new kind.
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "report", dir + "/hostA", dir + "/hostB", dir + "/hostC", "--fail-on",
                    "host-mismatch"}).code, 3);
  // Only the comparison: hostC's own sibling finding is not looked for.
  const auto across = RunCmd({LDSCOPE_BIN, "report", "--across-hosts-only", dir + "/hostA", dir + "/hostB",
                              dir + "/hostC"});
  EXPECT_EQ(across.code, 0) << across.err;
  testing::ExpectGolden("hosts_one_rank_across_only.txt", Streams(across.out));
}

// Both ranks of hostC load the old NCCL: they agree with each other, so only the
// cross-host comparison sees it; and the trace files are given as files, not dirs.
TEST(Hosts, OneHostDiffers) {
  const auto dir = testing::ScratchDir("hosts_one_host");
  TraceHost(dir, "hostA", 0, {"", ""});
  TraceHost(dir, "hostB", 2, {"", ""});
  TraceHost(dir, "hostC", 4, {kOld, kOld});
  ExpectReports("one_host", {dir + "/hostA/t.ldscope", dir + "/hostB/t.ldscope", dir + "/hostC/t.ldscope"}, 0);
}

// Every host loads the same file: no finding, the note says what was compared.
TEST(Hosts, Healthy) {
  const auto dir = testing::ScratchDir("hosts_healthy");
  TraceHost(dir, "hostA", 0, {"", ""});
  TraceHost(dir, "hostB", 2, {"", ""});
  TraceHost(dir, "hostC", 4, {"", ""});
  ExpectReports("healthy", {dir + "/hostA/", dir + "/hostB/", dir + "/hostC/"}, 0);
}

// Slurm without `ldscope run`: the audit library writes LDSCOPE_DIR traces per node
// (one file per process); tasks are told apart by SLURM_PROCID. And Open MPI ranks
// writing into one shared directory: the files are grouped by the host they name.
TEST(Hosts, SlurmAndMpiRanks) {
  const auto dir = testing::ScratchDir("hosts_slurm");
  for (int node = 0; node < 3; ++node) {
    const std::string host = fmt::format("node{}", node), out = dir + "/slurm/" + host;
    ASSERT_EQ(RunCmd({"/bin/mkdir", "-p", out}).code, 0);
    std::vector<std::string> env = {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_DIR=" + out, "LDSCOPE_HOST=" + host,
                                    fmt::format("SLURM_PROCID={}", node), fmt::format("SLURM_NODEID={}", node),
                                    "SLURM_LOCALID=0", "LD_LIBRARY_PATH=" + kSib + "/nccl/lib"};
    if (node == 1) env.push_back("LD_PRELOAD=" + kOld);
    const auto r = RunCmd({DLPROBE, "open", "libnccl.so.2"}, env);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  ExpectReports("slurm", {dir + "/slurm/node0", dir + "/slurm/node1", dir + "/slurm/node2"}, 0);
  ASSERT_EQ(RunCmd({"/bin/mkdir", "-p", dir + "/mpi"}).code, 0);
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<std::string> env = {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_DIR=" + dir + "/mpi",
                                    fmt::format("LDSCOPE_HOST=mpi{}", rank),
                                    fmt::format("OMPI_COMM_WORLD_RANK={}", rank), "OMPI_COMM_WORLD_LOCAL_RANK=0",
                                    "LD_LIBRARY_PATH=" + kSib + "/nccl/lib"};
    if (rank == 2) env.push_back("LD_PRELOAD=" + kOld);
    const auto r = RunCmd({DLPROBE, "open", "libnccl.so.2"}, env);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  ExpectReports("mpi", {dir + "/mpi"}, 0);
}

// Each host's traces carry the ELF facts of what it loaded (`run` writes them): two hosts
// dlopen a library that needs a symbol its dependency lacks, and the library files are
// gone when the report is made (it is read on another machine). Each host's report
// still names the missing symbol, from its own trace's facts.
TEST(Hosts, FactsOfEachHostsTraces) {
  const auto dir = testing::ScratchDir("hosts_facts");
  ASSERT_EQ(mkdir((dir + "/app").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir + "/v4").c_str(), 0700), 0);
  ASSERT_EQ(RunCmd({"/bin/cp", kFx + "/mpi/app/libmpiuser.so", dir + "/app/"}).code, 0);
  ASSERT_EQ(RunCmd({"/bin/cp", kFx + "/mpi/v4/libmpi.so.40", dir + "/v4/"}).code, 0);
  for (const char* host : {"hostA", "hostB"}) {
    ASSERT_EQ(mkdir((dir + "/" + host).c_str(), 0700), 0);
    const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/" + host + "/t.ldscope", "--",
                           DLPROBE, "open", dir + "/app/libmpiuser.so"},
                          {"LDSCOPE_HOST=" + std::string(host), "LD_LIBRARY_PATH=" + dir + "/v4"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  ASSERT_EQ(unlink((dir + "/app/libmpiuser.so").c_str()), 0);
  ASSERT_EQ(unlink((dir + "/v4/libmpi.so.40").c_str()), 0);
  ExpectReports("facts", {dir + "/hostA/", dir + "/hostB/"}, 0);
}

// A missing input and a damaged file are named on stderr (exit 1, the rest is
// reported); --junit is refused for several hosts (exit 2); nothing readable is exit 2.
TEST(Hosts, BadInputs) {
  const auto dir = testing::ScratchDir("hosts_bad");
  TraceHost(dir, "hostA", 0, {"", ""});
  TraceHost(dir, "hostB", 2, {"", kOld});
  ASSERT_EQ(mkdir((dir + "/hostC").c_str(), 0700), 0);
  testing::WriteFile(dir + "/hostC/t.ldscope", "not a trace");
  ExpectReports("bad_inputs", {dir + "/hostA/", dir + "/hostB/", dir + "/hostC/", dir + "/hostD/"}, 1);
  const auto j = RunCmd({LDSCOPE_BIN, "report", "--junit", dir + "/j.xml", dir + "/hostA/", dir + "/hostB/"});
  EXPECT_EQ(j.code, 2);
  EXPECT_EQ(j.err,
            "ldscope: --junit: not available for traces of several hosts (2 here: hostA, hostB, ...); report each "
            "host's traces on its own\n");
}

// Arguments are bytes: one holding a newline is one argument, not two. Three ranks on one
// host (the first two load one NCCL, the third preloads another): the third is another
// program when its argument is "mark<newline>FILE", a sibling that differs when its
// arguments are "mark" "FILE". Across hosts, the same: one rank per host.
TEST(Hosts, ArgumentsAreBytes) {
  const auto dir = testing::ScratchDir("hosts_argv_bytes");
  const std::string mark = dir + "/m", joined = "\"mark\n" + mark + "\"", apart = "mark " + mark;
  TraceHost(dir, "joined", 0, {"", "", kOld}, {apart, apart, joined});
  TraceHost(dir, "apart", 0, {"", "", kOld}, {apart, apart, apart});
  const auto one = RunCmd({LDSCOPE_BIN, "report", dir + "/joined/"});
  EXPECT_EQ(one.out.find("sibling-mismatch"), std::string::npos) << one.out;
  const auto two = RunCmd({LDSCOPE_BIN, "report", dir + "/apart/"});
  EXPECT_NE(two.out.find("warning[sibling-mismatch]"), std::string::npos) << two.out;
  TraceHost(dir, "h1", 0, {kOld}, {joined});
  TraceHost(dir, "h2", 1, {""}, {apart});
  TraceHost(dir, "h3", 2, {kOld}, {apart});
  const auto other = RunCmd({LDSCOPE_BIN, "report", "--across-hosts-only", dir + "/h1/", dir + "/h2/"});
  EXPECT_EQ(other.out.find("host-mismatch"), std::string::npos) << other.out;
  const auto same = RunCmd({LDSCOPE_BIN, "report", "--across-hosts-only", dir + "/h2/", dir + "/h3/"});
  EXPECT_NE(same.out.find("warning[host-mismatch]"), std::string::npos) << same.out;
}

}  // namespace
}  // namespace ldscope
