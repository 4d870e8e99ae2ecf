// Helpers for the tests: run a real program and capture its output, make scratch
// directories, load a trace into a timeline.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "ipc/server.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::testing {

struct Proc {
  int raw_status = 0;
  int code = -1;        // exit status, or 128+signal
  std::string out, err;
  bool timed_out = false;
  double seconds = 0;
};

// Runs argv with the current environment plus `set` ("NAME=value") minus `unset`.
Proc RunCmd(const std::vector<std::string>& argv, const std::vector<std::string>& set = {},
         const std::vector<std::string>& unset = {}, int timeout_s = 120);

// A fresh empty directory for one test, under the build tree (tests/scratch/NAME).
std::string ScratchDir(const std::string& name);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);

v1::Timeline TimelineOf(const std::vector<std::string>& traces);

// Processes in a timeline whose exe ends with suffix.
std::vector<const v1::ProcessTimeline*> ByExe(const v1::Timeline& t, const std::string& suffix);

// The loads of a process, as "reason requested_name -> path [ns]" lines.
std::vector<std::string> LoadLines(const v1::ProcessTimeline& p);

// Replaces every occurrence of from with to.
std::string ReplaceAll(std::string s, const std::string& from, const std::string& to);

// `dlprobe open A fork open B` traced into an LDSCOPE_DIR: its output, and the parent
// and its forked child, each complete; glibc_version, when given, is what both report.
void ExpectOpenForkOpen(const Proc& r, const v1::Timeline& t, const std::string& lib_a,
                        const std::string& lib_b, const std::string& glibc_version = "");

// A standalone `ldscope collect` in a child process (socket, trace and its stderr in
// dir), optionally under a descriptor limit; stopped (SIGTERM) when destroyed.
struct Collector {
  pid_t pid = -1;
  std::string socket, trace, err_file;
  explicit Collector(const std::string& dir, rlim_t fd_limit = 0);
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;
  ~Collector();
  // The environment that sends a traced program's events to it.
  std::vector<std::string> Env() const;
  // SIGTERM (and SIGCONT, in case it is stopped), wait, and return what it printed.
  std::string Stop();
};

// Compares the canonical form of actual (Canonicalise, canonical.h: no machine, build
// tree or run in it) with tests/golden/FILE as a whole; LDSCOPE_UPDATE_GOLDEN=1
// rewrites the file instead (then review the diff).
void ExpectGolden(const std::string& file, const std::string& actual);

// A SOCK_SEQPACKET socket listening at path, as the collector's (asserts that it works).
int ListenSeqpacket(const std::string& path);
// A connection to the SOCK_SEQPACKET socket at path (expects that it connects).
int ConnectSeqpacket(const std::string& path);
// One datagram (expects that all of it was sent).
void SendDatagram(int fd, const std::string& bytes);
// Accepts the connection waiting on lfd and reads its datagrams to its end; closes both.
// *connected is false when nothing was waiting.
std::vector<std::string> ReceiveDatagrams(int lfd, bool* connected);
// bytes with its length in front as a varint: one record of a trace file.
std::string Delimited(const std::string& bytes);
// /usr/bin/python3, then pyenv's CPython 3.<min_minor> to 3.<max_minor> present here
// ($PYENV_ROOT, else ~/.pyenv: versions/3.M.P/bin/python3), in name order.
std::vector<std::string> Pythons(int min_minor, int max_minor);

// Through a real ipc::Server writing DIR/t.ldscope: one connection sends `good` and closes,
// then another sends `bad`; served until both are gone (the bad one dropped by the server).
// Returns the server's stats once the trace is closed.
ipc::ServerStats ServeGoodAndBad(const std::string& dir, const std::vector<std::string>& good,
                                 const std::vector<std::string>& bad);

// True when the server hung up on fd within 5 s (EOF, or reset by the server).
bool ServerHungUp(int fd);

}  // namespace ldscope::testing
