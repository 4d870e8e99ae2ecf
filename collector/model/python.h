// Python attribution: ties the events of ldscope's Python hook (imports beginning and
// ending, ctypes dlopens) to a process image's timeline, by thread and time, and gives
// each load the innermost import, the line that triggered it and the top-level import.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ldscope_proto/events.pb.h"
#include "ldscope_proto/timeline.pb.h"

namespace ldscope::model {

// One hook connection's events (sorted by seq; the first is its PyStart).
using PyStream = std::vector<const v1::Event*>;

// Python attribution for one process image. The import spans and ctypes dlopens of its
// hook streams are computed first (the constructor, which also fills p's python info
// and imports); the model then attributes each entry as it creates it.
class PyAttribution {
 public:
  PyAttribution(v1::ProcessTimeline* p, const std::vector<const PyStream*>& streams);
  // Sets the python cause of a new load, search or failed dlopen (and a load's dlopen
  // mode) from its thread and time; request is the name its dlopen or search asked for
  // ("" for start-up loads). A load's object and requester paths are given (its
  // references may carry ids alone: model::BuildTimeline's with_objects); "" where it
  // has no requester. Nothing without hook streams.
  void Attribute(v1::Entry* en, const std::string& request, std::string_view object_path = {},
                 std::string_view requester_path = {});

 private:
  struct Span {
    uint64_t start = 0, end = 0;  // mono_ns; end 0: never ended
    uint32_t tid = 0;
    int parent = -1;
    v1::PyImportSpan* out = nullptr;
    int64_t dlopen_flags = -1;  // sys.getdlopenflags() at its start (-1: not sent)
  };
  struct Dlopen {
    uint64_t at = 0;
    uint32_t tid = 0;
    const v1::PyDlopen* ev = nullptr;
  };
  void Info(const std::vector<const PyStream*>& streams);
  void Spans(std::vector<const v1::Event*> events);
  // The cause of a load at `at` on tid; *mode: the dlopen mode behind it (-1: unknown).
  v1::PyCause CauseAt(uint64_t at, uint32_t tid, const std::string& request, int64_t* mode) const;
  bool IsHookModule(std::string_view path) const;

  v1::ProcessTimeline* p_;
  bool active_ = false;
  std::vector<std::string> hook_modules_;
  uint64_t hook_ready_ns_ = UINT64_MAX;  // first PyStart: the hook's own imports came before
  std::vector<Span> spans_;
  std::vector<Dlopen> dlopens_;
};

}  // namespace ldscope::model
