// The events of a trace set by stream, and the process images they make: what
// BuildTimeline reads before it builds a process (see timeline.h). Internal to the
// model layer.
#pragma once

#include "ldscope_proto/timeline.pb.h"
#include "model/python.h"
#include "store/trace_file.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <google/protobuf/arena.h>

namespace ldscope::model::streams {

// The collector's notes, by image (pid, image_start_ns).
struct Notes {
  std::set<std::pair<uint32_t, uint64_t>> still_running;
  std::map<std::pair<uint32_t, uint64_t>, std::string> untraced_after;  // -> exe_after
  std::set<std::pair<uint32_t, uint64_t>> python_hook_silent;
  uint32_t command_pid = 0;  // 0: not known
  int32_t command_exit_status = 0, command_signal = 0;
};

// One stream's events in seq order (equal seqs in file order): a file's decoded events
// (the file's own, which outlive the timeline's building), or the indexed
// records of one or more of a file's streams (LoadTraces gives streams 0 and 1 of a file
// one number), decoded one at a time as they are read.
class StreamEvents {
 public:
  void Add(const v1::Event* e) { decoded_.push_back(e); }
  void Add(const store::TraceFile* f, const store::EventStream* s) {
    file_ = f;  // LoadTraces numbers the streams of each file apart
    groups_.push_back(s);
  }
  // Sorts decoded events; merges several indexed streams.
  void Seal();
  size_t size() const {
    if (groups_.empty()) return decoded_.size();
    return decoded_.size() + (groups_.size() == 1 ? groups_[0]->records.size() : merged_.size());
  }
  // fn(const v1::Event&) for each event in order, until it returns false; the event
  // lives during the call.
  template <class F>
  void ForEach(F fn) const {
    for (const v1::Event* e : decoded_)
      if (!fn(*e)) return;
    if (groups_.empty()) return;
    std::vector<store::EventDecoder> decoders;
    for (const auto* g : groups_) decoders.emplace_back(*file_, *g);
    const size_t n = groups_.size() == 1 ? groups_[0]->records.size() : merged_.size();
    // The i-th record in order, decoded (in order: the decoders undo the wire economies
    // record after record).
    const auto decode = [&](size_t i, v1::Event* e) {
      if (groups_.size() == 1)
        decoders[0].Decode(groups_[0]->records[i], e);
      else
        decoders[merged_[i].first].Decode(Rec(merged_[i]), e);
    };
    if (n >= kPipelineAbove && std::thread::hardware_concurrency() > 1) return Pipelined(n, decode, fn);
    store::ScratchEvent scratch;
    for (size_t i = 0; i < n; ++i) {
      v1::Event* e = scratch.Next();
      decode(i, e);
      if (!fn(static_cast<const v1::Event&>(*e))) return;
    }
  }
  // The first event (there is one).
  v1::Event First() const;
  // The ProcessStart events, in order (exact alone: see store::DecodeAlone).
  std::vector<v1::Event> Starts() const;

 private:
  // A stream this long is decoded on a thread of its own, a batch of events ahead of the
  // builder (decoding is a third of building a big trace's timeline).
  static constexpr size_t kPipelineAbove = 1u << 16;
  static constexpr size_t kBatch = 2048, kBatchesAhead = 4;

  // ForEach's loop with the decoding on another thread: batches of decoded events pass
  // through a queue of at most kBatchesAhead (each batch on an arena of its own, reused),
  // and are handed to fn in order, until it returns false. fn runs on the calling thread.
  template <class Decode, class F>
  static void Pipelined(size_t n, const Decode& decode, F& fn) {
    struct Batch {
      google::protobuf::Arena arena;
      std::vector<v1::Event*> events;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::unique_ptr<Batch>> full, free;
    bool stop = false;  // the consumer left (fn threw): the producer ends
    for (size_t i = 0; i < kBatchesAhead + 1; ++i) free.push_back(std::make_unique<Batch>());
    std::thread producer([&] {
      for (size_t i = 0; i < n;) {
        std::unique_ptr<Batch> b;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || !free.empty(); });
          if (stop) return;
          b = std::move(free.front());
          free.pop_front();
        }
        b->arena.Reset();
        b->events.clear();
        for (; i < n && b->events.size() < kBatch; ++i) {
          v1::Event* e = google::protobuf::Arena::CreateMessage<v1::Event>(&b->arena);
          decode(i, e);
          b->events.push_back(e);
        }
        std::lock_guard<std::mutex> lock(mu);
        full.push_back(std::move(b));
        cv.notify_all();
      }
    });
    struct Join {  // the producer is stopped and joined however this returns
      std::mutex& mu;
      std::condition_variable& cv;
      bool& stop;
      std::thread& t;
      ~Join() {
        {
          std::lock_guard<std::mutex> lock(mu);
          stop = true;
        }
        cv.notify_all();
        t.join();
      }
    } join{mu, cv, stop, producer};
    for (size_t done = 0; done < n;) {
      std::unique_ptr<Batch> b;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !full.empty(); });
        b = std::move(full.front());
        full.pop_front();
      }
      for (const v1::Event* e : b->events)
        if (!fn(*e)) return;  // the producer is stopped by join
      done += b->events.size();
      std::lock_guard<std::mutex> lock(mu);
      free.push_back(std::move(b));
      cv.notify_all();
    }
  }

  uint64_t Rec(const std::pair<uint32_t, uint32_t>& m) const { return groups_[m.first]->records[m.second]; }
  std::vector<const v1::Event*> decoded_;
  const store::TraceFile* file_ = nullptr;
  std::vector<const store::EventStream*> groups_;
  std::vector<std::pair<uint32_t, uint32_t>> merged_;  // (group, record), with several groups
};

// A trace set's events by stream, with what the headers and the collector said.
struct Streams {
  std::map<uint32_t, StreamEvents> by_stream;
  std::map<uint32_t, uint64_t> writer_ns;  // stream -> its trace writer's pid namespace
  Notes notes;
};

// The events of every file by stream; the files' problems and the collector's records go
// to tl.
Streams ReadStreams(const store::TraceSet& traces, v1::Timeline* tl);

// One process image: a stream of the audit library's events.
struct Image {
  uint32_t stream = 0;
  std::optional<v1::Event> start_event;  // the one whose ProcessStart is the image's
  uint32_t pid = 0;
  uint64_t first_ns = 0;
  const StreamEvents* events = nullptr;
  // A start event (the image's, or a reconnect's) said that nothing follows it.
  v1::NotTraced not_traced = v1::NOT_TRACED_UNSPECIFIED;
  uint64_t fd_limit = 0;
  const v1::ProcessStart* start() const { return start_event ? &start_event->process_start() : nullptr; }
};

// A Python hook connection's events, decoded (PyAttribution keeps pointers into them).
using PyEvents = std::vector<v1::Event>;

// The audit library's streams as images, parents before children (by start time); the
// Python hook's streams go to py_streams (decoded into py_events).
std::vector<Image> Images(const std::map<uint32_t, StreamEvents>& by_stream,
                          std::vector<std::pair<uint32_t, const PyStream*>>* py_streams,
                          std::deque<PyEvents>* py_events, std::deque<PyStream>* py_pointers);

// The Python hook's connections of each image: of its pid, and begun in it (the latest
// image of the pid that started before the connection; a forked child's image is only
// seen at its first loader event, which can come later than the hook's, so with no such
// image the pid's first).
std::vector<std::vector<const PyStream*>> PyStreamsOf(
    const std::vector<Image>& images, const std::vector<std::pair<uint32_t, const PyStream*>>& py_streams);

// A process's fields from its start event and the collector's notes.
void StartProcess(const Image& img, const Streams& streams, v1::ProcessTimeline* p);

}  // namespace ldscope::model::streams
