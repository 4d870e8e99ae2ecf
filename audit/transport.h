// Delivers encoded events from the traced process: one SOCK_SEQPACKET datagram per
// event to the collector (LDSCOPE_SOCKET), or one length-prefixed record per event
// appended to a per-process file (LDSCOPE_DIR). Never blocks for long, never raises
// SIGPIPE, and never touches a descriptor that is no longer its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace ldscope::audit {

// How long one event may wait for room in a full collector queue before it is
// dropped. A live collector that many busy processes starve of CPU can take a few
// hundred milliseconds to come round to one connection; a dead one answers at once
// (EPIPE), so only a stopped or wedged collector makes a process wait. After a drop,
// events do not wait at all until a send succeeds again, so such a collector costs a
// traced process at most this much per stall.
constexpr int kSendWaitMs = 500;

class Transport {
 public:
  enum class Mode { kNone, kSocket, kDir };
  enum class Result { kSent, kDropped };

  // Reads LDSCOPE_SOCKET / LDSCOPE_DIR. Returns false when neither is set.
  bool Configure(const char* socket_path, const char* dir);
  Mode mode() const { return mode_; }

  // Opens the connection or file for the current process image. `image_start_ns`
  // names the per-process trace file. Returns false when it cannot.
  bool Open(uint32_t pid, uint64_t image_start_ns);
  // True while our descriptor is still the one we opened (a program may close or
  // reuse descriptor numbers: then it is not ours to write to).
  bool StillOurs() const;
  // Forget the descriptor without closing (it may belong to the program now), or
  // close it when it is still ours (after fork: the parent keeps its own copy).
  void Abandon();
  bool dead() const { return dead_; }

  // `data` must have kPrefixRoom writable bytes before it for the file record prefix.
  static constexpr size_t kPrefixRoom = 10;
  Result Send(uint8_t* data, size_t len);

 private:
  bool OpenSocket();
  bool OpenFile(uint32_t pid, uint64_t image_start_ns);
  void Adopt(int fd);

  Mode mode_ = Mode::kNone;
  char target_[4096] = {};
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool dead_ = false;
  bool stalled_ = false;
};

}  // namespace ldscope::audit
