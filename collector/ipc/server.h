// The collector's socket server: a SOCK_SEQPACKET listener served by one epoll loop.
// The audit library hands over an event ring (audit/ring.h, ipc/ring_reader.h) on its
// connection and writes its events there; the connection then carries only wake-ups
// and, by its end, says that the process is gone (the ring is read to its end then).
// Without a ring, a datagram holds one event, or a batch of them (the events of one
// loader transaction). Peers of another uid are refused (SO_PEERCRED); a peer that
// breaks the protocol (its datagrams or its ring) is disconnected and counted, without
// disturbing the others.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ipc/ring_reader.h"
#include "store/trace_file.h"

namespace ldscope::ipc {

struct ServerStats {
  uint64_t connections = 0;
  uint64_t datagrams = 0;
  uint64_t rings = 0;         // connections that handed over a ring
  uint64_t ring_records = 0;  // records read from rings
  uint64_t events = 0;
  uint64_t event_bytes = 0;
  uint64_t rejected_peers = 0;   // wrong uid
  uint64_t bad_clients = 0;      // disconnected for protocol violations
  uint64_t streams = 0;
  uint64_t dropped_reported = 0; // sum over streams of the audit library's drop counts
  uint64_t accept_deferred = 0;  // times the descriptor limit stopped accepting
  uint64_t fd_limit = 0;         // RLIMIT_NOFILE when that happened
  uint64_t refused = 0;          // connections that could not be accepted even when stopping
};

// The largest datagram a sender may send.
constexpr size_t kMaxDatagram = 64 * 1024;

// One event's bytes inside a datagram.
struct FrameSlice {
  const uint8_t* data;
  size_t size;
};

// Splits a datagram into its events. A datagram is either one serialized Event, or a
// batch: the serialization of `message EventBatch { repeated Event event = 1; }`, i.e.
// entries of field 1, length-delimited, each one whole Event. The first byte tells them
// apart: a batch starts with 0x0a, which no Event can (its field 1, pid, is a varint).
// Appends the events to out (cleared first); false when the datagram is too big, an
// entry is not field 1 or runs past the end, or the batch is empty. The events
// themselves are not parsed here (ParseFrame does that).
bool SplitFrame(const uint8_t* data, size_t size, std::vector<FrameSlice>* out);

// Any datagram a peer may send: what SplitFrame takes, or the Python hook's format
// (ipc/pyhook.h), whose events are converted into owned (cleared first) and sliced from
// there. False when it breaks its format; the events are not checked (ParseFrame does).
bool SplitDatagram(const uint8_t* data, size_t size, std::vector<std::string>* owned,
                   std::vector<FrameSlice>* out);

// Parses one event (a whole one-event datagram, or one slice of a batch) and applies
// the protocol's rules (a pid, and no stream number: streams are the collector's to
// assign). False for anything else.
bool ParseFrame(const uint8_t* data, size_t size, v1::Event* out);

class Server {
 public:
  Server() = default;
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens at socket_path.
  Status Listen(const std::string& socket_path);
  // Where accepted events go (written with their stream number).
  void set_writer(store::TraceWriter* w) { writer_ = w; }
  // The Python hook's directory that `run` put first on PYTHONPATH: a Python program
  // started with it whose hook never reports is named in the notes.
  void set_python_hook_dir(std::string dir) { python_hook_dir_ = std::move(dir); }
  // An extra descriptor to watch (e.g. a pidfd); Serve returns when it is readable.
  void WatchExtra(int fd);

  // One round of the event loop: waits up to timeout_ms (< 0: forever) and serves
  // whatever is ready.
  enum class PollResult { kIdle, kServed, kExtraReady, kError };
  PollResult Poll(int timeout_ms);
  size_t open_connections() const { return conns_.size(); }
  const ServerStats& stats() const { return stats_; }
  // Stops recording: reads everything still queued (connections waiting in the backlog
  // included), then closes every connection, and returns what the collector saw of the
  // images it could not record completely (still running, or gone untraced).
  v1::CollectorNotes StopRecording();
  // Every absolute path an ObjOpen named (the file's bytes, not escaped), for the ELF
  // facts the collector adds to the trace at the end.
  const std::set<std::string>& object_paths() const { return object_paths_; }
  // Every directory a search candidate lay in (absolute: a relative one taken in the
  // process's start directory), the bytes as the events give them: with the objects'
  // directories, where the collector looks for noexec mounts at the end.
  const std::set<std::string>& searched_dirs() const { return searched_dirs_; }
  // Called from the event loop with each path the first time it joins object_paths()
  // (so that its facts can be read while the programs run). It must not block.
  // With the path (absolute: a relative one resolved as the model does), the ObjOpen
  // that named it first (what was loaded: device, inode, build-id).
  void set_on_new_object(std::function<void(const std::string&, const v1::ObjOpen&)> f) {
    on_new_object_ = std::move(f);
  }
  // Whether any event came from pid.
  bool SawPid(uint32_t pid) const;
  // The traced processes (by pid) and their images (a process that exec'd a traced
  // program has one per program), counting the audit library's streams only: a Python
  // hook's stream is a second view of an image, not another one.
  struct ProcessCount {
    size_t processes = 0, images = 0;
  };
  ProcessCount CountProcesses() const;
  // The executable of an image named in the notes ("" when unknown).
  std::string ExeOfImage(uint32_t pid, uint64_t image_start_ns) const;
  // The images whose start event said that they are not traced, in stream order.
  struct NotTracedImage {
    uint32_t pid = 0;
    std::string exe;
    v1::NotTraced reason = v1::NOT_TRACED_UNSPECIFIED;
    uint64_t fd_limit = 0;
  };
  std::vector<NotTracedImage> NotTracedImages() const;
  void Shutdown();

 private:
  struct Conn {
    uint32_t stream = 0;  // 0 until its ProcessStart arrives
    uint32_t pid = 0;
    pid_t peer = 0;       // the connecting process, in our pid namespace (SO_PEERCRED)
    std::unique_ptr<RingReader> ring;  // once its announce datagram arrived
  };
  // What the collector knows of one audit-library stream (process image).
  struct Stream {
    uint32_t pid = 0;
    uint64_t image_start_ns = 0;
    std::string exe;
    bool python = false;       // the Python hook's stream (image_start_ns: its PyStart's time)
    bool expects_hook = false; // a Python program started with the hook on PYTHONPATH
    bool started = false;      // its la_preinit arrived: start-up is done
    bool dlopened = false;     // it mapped an object after start-up
    bool exited = false;       // its ProcessExit arrived
    int open = 0;              // connections of it still open
    bool ended_open = false;   // a connection of it ended before the exit event
    std::string exe_after;     // /proc/PID/exe then (the process was alive: an exec)
    // Its events' sequence numbers, to tell whether any is missing.
    uint64_t events = 0, min_seq = UINT64_MAX, max_seq = 0;
    std::string cwd;           // its ProcessStart's working directory
    // Its ProcessStart said it is not traced (NotTraced), under this descriptor limit.
    v1::NotTraced not_traced = v1::NOT_TRACED_UNSPECIFIED;
    uint64_t fd_limit = 0;
  };
  void NoteSearchedDir(const Stream& s, const v1::Search& search);
  void Accept();
  // A new connection from the same user is registered; any other is closed (false).
  bool Admit(int fd);
  void PauseAccept();
  void ResumeAccept();
  // Reads up to a bounded number of datagrams; true when more may be queued.
  bool ReadFrom(int fd);
  void Drop(int fd, bool bad);
  void NoteEnd(const Conn& c);
  bool HandleEvent(Conn& c, const uint8_t* data, size_t size);
  // A ring's control datagram (ring::IsControl): its announce, or a wake-up. False
  // when it breaks the protocol. `passed` is the descriptor it carried (-1: none).
  bool HandleControl(Conn& c, const uint8_t* data, size_t size, int passed);
  // Reads up to a bounded number of the ring's records (all of them with `to_end`, for a
  // connection that ended); false when the ring or an event in it broke the protocol
  // (the connection is dropped then).
  bool ReadRing(int fd, bool to_end);
  // Every open ring, a bounded number of records each (the loop's regular visit).
  void ReadRings();
  // StopRecording's steps (server.cc).
  void ReadQueued();
  void CloseConnections(std::vector<int>* open, v1::CollectorNotes* notes);
  void ReadBacklog(v1::CollectorNotes* notes);
  std::map<uint32_t, const Stream*> StreamsInOrder() const;
  void NoteUntracedAfter(v1::CollectorNotes* notes) const;
  void NoteSilentHooks(v1::CollectorNotes* notes) const;

  int listen_fd_ = -1;
  int spare_fd_ = -1;             // held in reserve for a ring's descriptor (ReadFrom)
  uint64_t listen_fd_limit_ = 0;  // RLIMIT_NOFILE when listening began
  int epoll_fd_ = -1;
  int extra_fd_ = -1;
  std::string path_;
  store::TraceWriter* writer_ = nullptr;
  std::string python_hook_dir_;
  std::unordered_map<int, Conn> conns_;
  // (pid, image start) -> stream, so a reconnecting image keeps its stream.
  std::unordered_map<std::string, uint32_t> streams_;
  std::unordered_map<uint32_t, uint64_t> dropped_by_stream_;
  std::unordered_map<uint32_t, Stream> stream_info_;
  bool accept_paused_ = false;
  std::set<std::string> object_paths_;
  std::set<std::string> searched_dirs_;
  std::function<void(const std::string&, const v1::ObjOpen&)> on_new_object_;
  bool freed_ = false;         // a connection closed since the last Poll
  size_t open_rings_ = 0;
  std::vector<int> ring_fds_;
  std::vector<FrameSlice> slices_;
  std::vector<std::string> converted_;  // the Python hook's events, as protobuf
  ServerStats stats_;
};

}  // namespace ldscope::ipc
