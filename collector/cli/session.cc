// See session.h.
#include "cli/session.h"

#include <gnu/libc-version.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "analysis/mounts.h"
#include "analysis/owners.h"
#include "analysis/record_facts.h"
#include "text/escape.h"

namespace ldscope::cli {
namespace {

// Inode of our pid namespace: pids in the trace are as each process saw them.
uint64_t PidNamespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

bool Empty(const v1::CollectorNotes& n) {
  return n.still_running_size() == 0 && n.held_by_children() == 0 && n.untraced_after_size() == 0 &&
         n.accept_deferred() == 0 && n.refused() == 0 && n.python_hook_silent_size() == 0 && n.command_pid() == 0;
}

// The NVIDIA kernel driver's version on this machine, a fact of the traced machine that
// the report cannot read later (docs/LOADER.md, "How libcuda is found"). The proc file
// reads "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug ..." (or
// "... Open Kernel Module for x86_64  580.65.06  Release Build ..."); the sysfs file holds
// the version alone. LDSCOPE_NVIDIA_VERSION_FILE (for tests) replaces both paths.
void RecordNvidiaDriver(v1::TraceHeader* h) {
  std::vector<std::string> paths = {"/proc/driver/nvidia/version", "/sys/module/nvidia/version"};
  if (const char* test = getenv("LDSCOPE_NVIDIA_VERSION_FILE"); test != nullptr && *test != '\0')
    paths = {test};
  static const std::regex version("([0-9]+\\.[0-9]+(\\.[0-9]+)?)");
  for (const auto& path : paths) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str().substr(0, 4096);
    text = text.substr(0, text.find('\n'));
    const auto module = text.find("Kernel Module");
    std::smatch m;
    const std::string tail = module == std::string::npos ? text : text.substr(module);
    h->set_nvidia_driver_source(path);
    if (std::regex_search(tail, m, version)) h->set_nvidia_driver_version(m[1]);
    return;  // present but unparsable: the source is named, the version stays unknown
  }
  h->set_nvidia_driver_source("none");
}

}  // namespace

v1::TraceHeader NewTraceHeader() {
  v1::TraceHeader h;
  h.set_format_version(1);
  // LDSCOPE_HOST labels the traces of one node (README: many hosts); else the host name.
  const char* label = std::getenv("LDSCOPE_HOST");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  h.set_host(label != nullptr && *label != '\0' ? std::string(label) : std::string(host));
  h.set_glibc_version(gnu_get_libc_version());
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  h.set_start_unix_ns(static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec);
  timespec mono{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  h.set_start_mono_ns(static_cast<uint64_t>(mono.tv_sec) * 1000000000ull + mono.tv_nsec);
  h.set_writer("ldscope " LDSCOPE_VERSION);
  h.set_pid_namespace(PidNamespace());
  RecordNvidiaDriver(&h);
  return h;
}

Status Session::Prepare(const std::string& output, bool keep_copy) {
  header_ = NewTraceHeader();
  if (keep_copy) writer_.KeepCopy();
  return writer_.Prepare(output);
}

Status Session::Listen(const std::string& socket_path) {
  if (Status s = server_.Listen(socket_path); !s.ok()) {
    Abandon();
    return s;
  }
  server_.set_writer(&writer_);
  return Status::Ok();
}

Status Session::Begin() { return writer_.Begin(header_); }

void Session::Abandon() {
  server_.Shutdown();
  writer_.Discard();
}

void Session::Drain(int idle_ms, int cap_ms) {
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    // Nothing connected: only take what is already queued (accepts included), then stop.
    const auto r = server_.Poll(server_.open_connections() == 0 ? 0 : idle_ms);
    const bool idle = (r == ipc::Server::PollResult::kIdle && server_.open_connections() == 0) ||
                      r == ipc::Server::PollResult::kError;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long elapsed_ms =
        (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (idle || elapsed_ms >= cap_ms) break;
  }
  notes_ = server_.StopRecording();
  // Only a command that failed is worth a record (a traced program's success adds none).
  if (command_pid_ != 0 && command_status_ != 0) {
    notes_.set_command_pid(command_pid_);
    if (WIFEXITED(command_status_)) notes_.set_command_exit_status(WEXITSTATUS(command_status_));
    if (WIFSIGNALED(command_status_)) notes_.set_command_signal(WTERMSIG(command_status_));
  }
  if (Empty(notes_)) return;
  v1::Event e;
  e.set_pid(static_cast<uint32_t>(getpid()));  // readers require one; the body says whose
  *e.mutable_collector() = notes_;
  const std::string bytes = e.SerializeAsString();
  // A failed write is reported by Finish (the writer's Close) with what was lost.
  writer_.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0).IgnoreError();
}

void Session::ReadFactsEarly(bool keep_files) {
  keep_files_ = keep_files;
  if (keep_files) facts_reader_.KeepFiles();
  server_.set_on_new_object([this](const std::string& path, const v1::ObjOpen& o) {
    facts_reader_.Add(path, {o.dev(), o.ino(), o.build_id()});
  });
}

void Session::WriteFacts(int limit_ms) {
  server_.set_on_new_object(nullptr);
  const analysis::RecordedFacts facts = facts_reader_.Finish(server_.object_paths(), limit_ms);
  if (keep_files_)
    for (auto& f : facts_reader_.TakeFiles()) files_.Adopt(std::move(f));
  v1::Event e;
  e.set_pid(static_cast<uint32_t>(getpid()));
  for (const auto& r : facts.records) {
    *e.mutable_object_facts() = r;
    const std::string bytes = e.SerializeAsString();
    // As in Drain: Finish reports a failed write.
    writer_.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0).IgnoreError();
  }
  // The directories searched and loaded from that lie on noexec mounts.
  std::set<std::string> dirs = server_.searched_dirs();
  for (const auto& p : server_.object_paths()) dirs.insert(p.substr(0, std::max<size_t>(1, p.rfind('/'))));
  for (const auto& m : analysis::NoexecMounts(dirs)) {
    *e.mutable_mount_facts() = m;
    const std::string bytes = e.SerializeAsString();
    writer_.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0).IgnoreError();
  }
  // The package that installed each loaded file, looked up here and now.
  for (const auto& o : analysis::RecordOwners(server_.object_paths())) {
    *e.mutable_owner_facts() = o;
    const std::string bytes = e.SerializeAsString();
    writer_.AppendEvent(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0).IgnoreError();
  }
}

Status Session::Finish() {
  server_.Shutdown();
  return writer_.Close();
}

std::string Session::Summary() const {
  const auto& s = server_.stats();
  const ipc::Server::ProcessCount n = server_.CountProcesses();
  std::string out = fmt::format("{} process{}{}, {} events, {} dropped", n.processes, n.processes == 1 ? "" : "es",
                                n.images > n.processes ? fmt::format(" ({} images: exec)", n.images) : "", s.events,
                                s.dropped_reported);
  if (s.bad_clients > 0) out += fmt::format(", {} bad clients disconnected", s.bad_clients);
  if (s.rejected_peers > 0) out += fmt::format(", {} peers of another user refused", s.rejected_peers);
  out += NotesText();
  return out;
}

}  // namespace ldscope::cli

namespace ldscope::cli {

// The processes the trace does not cover completely, by pid and program.
std::string Session::NotesText() const {
  const v1::CollectorNotes& n = notes_;
  std::string out;
  const auto not_traced = server_.NotTracedImages();
  if (!not_traced.empty()) {
    std::vector<std::string> who;
    for (const auto& i : not_traced)
      who.push_back(fmt::format("pid {} ({}, descriptor limit {})", i.pid, text::Escape(i.exe), i.fd_limit));
    out += fmt::format(
        "; {} process{} not traced, their descriptor limit leaving no descriptor the "
        "program could not get itself: {}",
        not_traced.size(), not_traced.size() == 1 ? "" : "es", fmt::join(who, ", "));
  }
  if (n.still_running_size() > 0) {
    out += fmt::format("; {} process{} still running when recording stopped, later events not "
                       "traced:", n.still_running_size(), n.still_running_size() == 1 ? "" : "es");
    std::vector<std::string> who;
    for (const auto& r : n.still_running())
      who.push_back(fmt::format("pid {} ({})", r.pid(), text::Escape(server_.ExeOfImage(r.pid(), r.image_start_ns()))));
    out += fmt::format(" {}", fmt::join(who, ", "));
  }
  if (n.held_by_children() > 0)
    out += fmt::format("; {} connection{} still held by forked children that had sent nothing",
                       n.held_by_children(), n.held_by_children() == 1 ? "" : "s");
  std::string exec_untraced, gone;
  int n_gone = 0;
  for (const auto& u : n.untraced_after()) {
    const std::string who = fmt::format("pid {} ({}", u.image().pid(),
                                        text::Escape(server_.ExeOfImage(u.image().pid(), u.image().image_start_ns())));
    std::string& list = u.exe_after().empty() ? gone : exec_untraced;
    list += (list.empty() ? " " : ", ") + who;
    if (u.exe_after().empty()) {
      gone += ")";
      ++n_gone;
    } else {
      exec_untraced += ", then running " + text::Escape(u.exe_after()) + " untraced)";
    }
  }
  if (!exec_untraced.empty()) out += "; not traced after an exec:" + exec_untraced;
  if (n_gone > 0)
    out += fmt::format("; {} image{} ended without an exit event and nothing traced followed "
                       "(_exit, a crash, or an exec into a program not traced):{}",
                       n_gone, n_gone == 1 ? "" : "s", gone);
  if (n.python_hook_silent_size() > 0) {
    out += "; the Python hook did not report in (its loads are not attributed to imports):";
    std::vector<std::string> who;
    for (const auto& r : n.python_hook_silent())
      who.push_back(fmt::format("pid {} ({})", r.pid(), text::Escape(server_.ExeOfImage(r.pid(), r.image_start_ns()))));
    out += fmt::format(" {}", fmt::join(who, ", "));
  }
  if (n.accept_deferred() > 0)
    out += fmt::format("; descriptor limit {} reached {} time{}: connections waited for it",
                       n.fd_limit(), n.accept_deferred(), n.accept_deferred() == 1 ? "" : "s");
  if (n.refused() > 0)
    out += fmt::format("; {} connections refused (no descriptor left)", n.refused());
  return out;
}

}  // namespace ldscope::cli
