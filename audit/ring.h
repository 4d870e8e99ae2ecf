// The shared-memory ring a traced process writes its events into (audit/transport.cc)
// and the collector reads (collector/ipc/ring_reader.cc): the layout both sides agree
// on. Header-only, no libc: the audit library includes it too.
//
// The ring is a sealed memfd (it cannot shrink or grow) created by the audit library
// and handed to the collector over the connection, after the peer and directory checks,
// in an announce datagram (SCM_RIGHTS). Nothing of it is on a file system. The memory
// outlives the process: the collector holds its own mapping, and reads what is left
// once the connection ends (the process exited, crashed, or was killed).
//
// One writer per ring: the audit library writes only with its lock held (audit.cc,
// Record), whichever thread or loader path calls a hook; a forked child writes a ring
// of its own. Records are whole datagrams as the socket would carry them (one Event, or
// an EventBatch), each preceded by its length, 8-byte aligned:
//
//   [u32 length][length bytes][zero padding to a multiple of 8]
//
// The length word never straddles the end (it is 8-aligned and the capacity is a
// multiple of 8); the bytes may wrap around. `head` and `tail` count bytes ever
// written and consumed; the writer publishes a record by a release store of `head`,
// the collector frees room by a release store of `tail`. For the collector the ring is
// untrusted input: any value may be anything, at any time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ldscope::ring {

constexpr uint64_t kMagic = 0x31474e4952534c44ull;  // "LDSRING1"
constexpr uint32_t kVersion = 2;
// The header shares its page with the first data bytes: a process that writes less than a
// page (most short-lived ones) touches one page of the ring, not two (a page fault, a page
// zeroed and freed less, on each side).
constexpr size_t kHeaderBytes = 256;
constexpr size_t kCapacity = size_t{1} << 20;  // data bytes after the header
constexpr size_t kFileBytes = kHeaderBytes + kCapacity;
// The largest record: the largest datagram the socket carries (ipc::kMaxDatagram).
constexpr size_t kMaxRecord = 64 * 1024;
// The writer asks for a wake-up when a record leaves the ring at least this full, once
// until the collector has read it; otherwise the collector reads at its own pace (each
// wake-up of its loop, at the latest every kReadEveryMs while rings are open, and at
// the connection's end).
constexpr size_t kWakeAt = kCapacity / 2;
constexpr int kReadEveryMs = 10;
constexpr int kProbeMs = 2 * kReadEveryMs;

struct alignas(64) Header {
  uint64_t magic;
  uint32_t version;
  uint32_t capacity;          // kCapacity; the reader uses its own constant, not this
  alignas(64) uint64_t head;  // written by the writer
  alignas(64) uint64_t tail;  // written by the reader
  // Records consumed (written by the reader with tail): a writer that gives the ring up
  // (a dead collector) counts what it wrote beyond as dropped.
  uint64_t tail_records;
  // The reader's last visit (CLOCK_MONOTONIC, ns; at least every kReadEveryMs while it
  // runs). A writer that finds it older than kProbeMs probes the connection (a wake-up:
  // a dead collector answers EPIPE, and the writer reconnects to a new one), at most
  // once per kProbeMs.
  uint64_t visited_ns;
  // 1: the writer sent a wake-up the reader has not answered (it stores 0 after
  // reading). Exchanged by the writer, so that one record sends at most one.
  uint32_t wake;
  // 1: the reader is done with this ring (the connection ended): the writer opens a
  // new connection and ring at its next event (a program that closed our descriptor).
  uint32_t detached;
};
static_assert(sizeof(Header) <= kHeaderBytes, "the header fits before the data");
static_assert(kHeaderBytes % 64 == 0, "the data starts on a cache line of its own");

constexpr size_t RecordBytes(size_t len) { return (4 + len + 7) & ~size_t{7}; }

// The announce datagram that carries the ring's descriptor, and the wake-up datagram:
// told apart from events by their first byte (0: no Event or EventBatch starts with
// tag 0), from the Python hook's datagrams (0x00 0x01, ipc/pyhook.h) by the magic that
// follows (its first byte is 0x44), then the kind.
constexpr uint8_t kAnnounce = 1;
constexpr uint8_t kWake = 2;
constexpr size_t kControlBytes = 10;  // 0, 8 bytes of magic, kind
inline void ControlDatagram(uint8_t kind, uint8_t out[kControlBytes]) {
  out[0] = 0;
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<uint8_t>(kMagic >> (8 * i));
  out[9] = kind;
}

inline bool IsControl(const uint8_t* data, size_t size) {
  if (size != kControlBytes || data[0] != 0) return false;
  for (int i = 0; i < 8; ++i)
    if (data[1 + i] != static_cast<uint8_t>(kMagic >> (8 * i))) return false;
  return true;
}

}  // namespace ldscope::ring
