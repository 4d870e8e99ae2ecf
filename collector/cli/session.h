// A collecting session shared by `run` and `collect`: a socket server whose accepted
// events stream into a trace file.
#pragma once

#include <sys/types.h>

#include <string>

#include "analysis/context.h"
#include "analysis/record_facts.h"
#include "ipc/server.h"
#include "store/trace_file.h"

namespace ldscope::cli {

// How long WriteFacts may read files (the 315 objects of `import torch` take about
// 0.2 s; a trace of thousands of files stops here, the rest without facts).
constexpr int kFactsLimitMs = 10000;

// Drain's bounds. Once the traced programs are done, a connection still open belongs to
// a process that outlived them (`run`) or to a program traced elsewhere (`collect`).
// Drain reads until none is open or cap_ms has passed, waking at least every poll_ms
// to look at the clock (so it overshoots the cap by at most poll_ms). What it did not
// see end is recorded as incomplete (events.proto's CollectorNotes).
// `run`: the command has ended; its children still running (a daemon, a background
// job) get up to 3 s to end with complete images before the report.
constexpr int kRunDrainPollMs = 200;
constexpr int kRunDrainCapMs = 3000;
// `collect`: a signal asked it to stop, and programs traced elsewhere may run for
// hours: it only takes what is already on its way, for at most 1 s.
constexpr int kCollectDrainPollMs = 100;
constexpr int kCollectDrainCapMs = 1000;

// A trace file's header as this machine and ldscope write it now: host (LDSCOPE_HOST),
// glibc, clocks, writer, pid namespace, NVIDIA kernel driver.
v1::TraceHeader NewTraceHeader();

class Session {
 public:
  // Opens output (store::OpenOutput: an existing file keeps what it had until Finish).
  // keep_copy: keep the trace in memory too (trace_copy()). A failure is the output's
  // (exit kWriteFailed).
  Status Prepare(const std::string& output, bool keep_copy);
  // The trace goes to the file our standard output is.
  bool writes_stdout() const { return writer_.writes_stdout(); }
  // Listens on socket_path. On failure, the output is discarded (Abandon).
  Status Listen(const std::string& socket_path);
  // The traced programs can start: write the trace header. Events
  // are recorded only after this. On failure, events are still served and kept in
  // memory; Finish reports the failure again.
  Status Begin();
  // The run did not start: stop listening; the output keeps what it had.
  void Abandon();
  // After the traced programs are done: read what is still queued, and wait for open
  // connections to close, at most cap_ms in all, each wait at most idle_ms (see
  // kRunDrainPollMs). Then stops recording and writes what it saw of incomplete images
  // into the trace (see events.proto's CollectorNotes).
  void Drain(int idle_ms, int cap_ms);
  // Before Drain: the command's pid and its wait status, which Drain writes into the
  // notes unless it is exit status 0 (the analysis tells a failure the program did not
  // survive from it).
  void SetCommandExit(pid_t pid, int wait_status) {
    command_pid_ = static_cast<uint32_t>(pid);
    command_status_ = wait_status;
  }
  // Before the traced programs start, when WriteFacts will be called: each object file
  // is read for its facts as soon as the first event naming it arrives, on a background
  // thread (analysis::FactsReader), so that WriteFacts has little left to read.
  // keep_files: keep the files read for the report made right after (read_files()).
  void ReadFactsEarly(bool keep_files);
  // After Drain: adds the ELF facts of every object file the traced programs loaded to
  // the trace (analysis/record_facts.h): the same records whether or not ReadFactsEarly
  // was called (but for files changed since they were read, see FactsReader). The
  // files not read yet are read for at most limit_ms.
  void WriteFacts(int limit_ms);
  // Closes the server and the file.
  Status Finish();
  // "N processes, M events, D dropped" for the closing message.
  std::string Summary() const;

  ipc::Server& server() { return server_; }
  // After WriteFacts, with ReadFactsEarly(true): the files read for the facts, as the
  // analysis reads them (nullptr otherwise).
  analysis::Files* read_files() { return keep_files_ ? &files_ : nullptr; }
  // The trace's bytes, when Start was asked to keep them.
  const std::string& trace_copy() const { return writer_.copy(); }
  const v1::CollectorNotes& notes() const { return notes_; }

 private:
  std::string NotesText() const;

  ipc::Server server_;
  analysis::FactsReader facts_reader_;
  bool keep_files_ = false;
  analysis::Files files_;
  store::TraceWriter writer_;
  v1::TraceHeader header_;
  v1::CollectorNotes notes_;
  uint32_t command_pid_ = 0;
  int command_status_ = 0;
};

}  // namespace ldscope::cli
