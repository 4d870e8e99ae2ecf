// Delivers encoded events from the traced process: to the collector (LDSCOPE_SOCKET) as
// SOCK_SEQPACKET datagrams, or, with LDSCOPE_TRANSPORT=ring, through a shared-memory ring
// (audit/ring.h) handed over on the connection, with no system call per event (where no
// ring can be made, no memfd or the descriptor limit, as datagrams); or as length-prefixed
// records appended to a per-process file (LDSCOPE_DIR). A record, datagram or write
// carries one event, or a batch of them (the events of one loader transaction). Never
// blocks for long, never raises SIGPIPE, and never touches a descriptor that is no
// longer its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

#include "ring.h"

namespace ldscope::audit {

// How long one event may wait for room in a full collector queue before it is
// dropped. A live collector that many busy processes starve of CPU can take a few
// hundred milliseconds to come round to one connection; a dead one answers at once
// (EPIPE), so only a stopped or wedged collector makes a process wait. After a drop,
// events do not wait at all until a send succeeds again, so such a collector costs a
// traced process at most this much per stall.
constexpr int kSendWaitMs = 500;

// The inode in /proc/self/ns/pid's link text "pid:[4026531836]" (0: unknown): the pid
// namespace whose pids the events carry.
uint64_t PidNamespaceIno();

// The rule a collector's socket must meet before anything is sent to it (README,
// "Security"): its directory is owned by this process's user (real or effective) or
// root, and is not writable by others unless it has the sticky bit; the process that
// listens on it is this user's or root's (SO_PEERCRED on the connection). Anything else
// may be another user's listener, who would receive argv, the recorded environment and
// every path. `path` is the socket's (NUL-terminated; cut and restored in place).
bool TrustedSocketDir(char* path);
bool TrustedPeer(int fd);

class Transport {
 public:
  enum class Mode { kNone, kSocket, kDir };
  enum class Result { kSent, kDropped };

  // Reads LDSCOPE_SOCKET / LDSCOPE_DIR. Returns false when neither is set. With
  // `datagrams` (unless LDSCOPE_TRANSPORT=ring), the connection carries the events itself.
  bool Configure(const char* socket_path, const char* dir, bool datagrams = true);
  Mode mode() const { return mode_; }

  // The glibc release a trace file's header names (LDSCOPE_DIR); not copied.
  void set_glibc_version(const char* v) { glibc_version_ = v; }

  // Opens the connection or file for the current process image. `image_start_ns`
  // names the per-process trace file. Returns false when it cannot; error() says why
  // (an errno value, 0 when unknown).
  bool Open(uint32_t pid, uint64_t image_start_ns);
  int error() const { return error_; }
  // Open found no descriptor number the program could not get itself (transport.cc,
  // kHighFd): it returned false but holds a descriptor at a number the program could get,
  // for one start event that says the image is not traced, to be sent at once and then
  // let go (Abandon). Every later Open of this image fails.
  bool no_room() const { return no_room_; }
  uint64_t fd_limit() const { return fd_limit_; }  // RLIMIT_NOFILE, when no_room()
  // True while our descriptor is still the one we opened (a program may close or
  // reuse descriptor numbers: then it is not ours to write to).
  bool StillOurs() const;
  // Forget the descriptor without closing (it may belong to the program now), or
  // close it when it is still ours (after fork: the parent keeps its own copy).
  void Abandon();
  bool dead() const { return dead_; }
  // Events go into a ring (no system call each): nothing needs holding to save sends.
  bool ring() const { return ring_ != nullptr; }
  // Whether the next event can be delivered where the last one went: the ring's reader
  // has not let it go (it does when our connection ends: a program that closed our
  // descriptor), or, without a ring, the descriptor is still ours (one fstat).
  bool Usable();
  // Records written into the ring that its reader did not take (0 without a ring): what
  // giving the ring up loses.
  uint64_t UnreadRecords() const;
  // A send was dropped for want of room and none has succeeded since: the collector's
  // queue for this connection is full (a stopped or starved collector).
  bool stalled() const { return stalled_; }

  // One event. `data` must have kPrefixRoom writable bytes before it for the file
  // record prefix.
  static constexpr size_t kPrefixRoom = 10;
  Result Send(uint8_t* data, size_t len);
  // Bytes already framed by FrameInBatch, event after event: one datagram (an
  // EventBatch, see below) or one write (trace records), delivered whole or not at all.
  Result SendBatch(const uint8_t* data, size_t len);
  // Writes the frame header that precedes an event of event_len bytes inside a batch
  // into out (at most kMaxFrameHeader bytes); returns its length. Socket: the tag of
  // field 1 (length-delimited) and the length, so a batch datagram is the encoding of
  // `message EventBatch { repeated Event event = 1; }`, told apart from a one-event
  // datagram by its first byte (an Event's field 1, pid, is a varint). Directory: the
  // length, as every record of a trace file.
  static constexpr size_t kMaxFrameHeader = 11;
  size_t FrameInBatch(uint8_t* out, size_t event_len) const;

 private:
  Result Deliver(const uint8_t* data, size_t len);
  bool OpenSocket();
  bool OpenFile(uint32_t pid, uint64_t image_start_ns);
  // Makes a ring and hands it to the collector; false (and no ring) when it cannot.
  bool OpenRing();
  void CloseRing();
  Result RingDeliver(const uint8_t* data, size_t len);
  // Waits (bounded by kSendWaitMs, once per stall) for `need` bytes of room.
  bool WaitForRoom(uint64_t need);
  // Sends a wake-up datagram (also the probe of a dead collector: EPIPE).
  void Wake();
  void ProbeIfUnvisited();  // see ring::Header::visited_ns
  // Moves fd out of the program's way and makes it ours; false when it stays where it
  // is (no_room()) or is not ours (fd_ < 0).
  bool Adopt(int fd);

  Mode mode_ = Mode::kNone;
  char target_[4096] = {};
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool dead_ = false;
  bool stalled_ = false;
  bool no_room_ = false;
  uint64_t fd_limit_ = 0;
  int error_ = 0;
  const char* glibc_version_ = "";
  bool datagrams_ = true;
  ring::Header* ring_ = nullptr;
  uint8_t* ring_data_ = nullptr;
  uint64_t ring_head_ = 0;       // our own count: the shared one is only ever stored
  uint64_t ring_probed_ns_ = 0;  // the last probe, or the ring's start
  uint64_t ring_records_ = 0;
};

}  // namespace ldscope::audit
