// See trace_bytes.h.
#include "store/trace_bytes.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>

namespace ldscope::store {

// A mapped trace that another program truncates while it is read (a new `run -o` on the
// same path) would kill this process with SIGBUS at the first page past the new end. The
// mappings are guarded instead: such a fault maps a page of zeros in place (where records
// then read as damaged) and is noted, the lowest page first, for the reader to report.
namespace {
struct Guard {
  std::atomic<uintptr_t> lo{0}, hi{0};
  std::atomic<uintptr_t> cut{UINTPTR_MAX};  // the lowest page replaced
};
constexpr int kGuards = 64;  // mappings guarded at once (more are read unguarded)
Guard g_guards[kGuards];
std::atomic<long> g_page{0};

void OnBus(int, siginfo_t* si, void*) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(si->si_addr);
  for (Guard& g : g_guards) {
    const uintptr_t lo = g.lo.load(), hi = g.hi.load();
    if (lo == 0 || at < lo || at >= hi) continue;
    const uintptr_t page = at & ~static_cast<uintptr_t>(g_page.load() - 1);
    if (mmap(reinterpret_cast<void*>(page), static_cast<size_t>(g_page.load()), PROT_READ,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
      break;
    uintptr_t seen = g.cut.load();
    while (page < seen && !g.cut.compare_exchange_weak(seen, page)) {
    }
    return;
  }
  signal(SIGBUS, SIG_DFL);  // not a guarded mapping: the fault comes again, as it would have
}

Guard* GuardMapping(const uint8_t* data, size_t size) {
  static const bool installed = [] {
    g_page = sysconf(_SC_PAGESIZE);
    struct sigaction sa {};
    sa.sa_sigaction = OnBus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, nullptr) == 0;
  }();
  if (!installed) return nullptr;
  for (Guard& g : g_guards) {
    uintptr_t free = 0;
    if (!g.lo.compare_exchange_strong(free, 1)) continue;  // taken
    g.cut = UINTPTR_MAX;
    g.hi = reinterpret_cast<uintptr_t>(data) + size;
    g.lo = reinterpret_cast<uintptr_t>(data);
    return &g;
  }
  return nullptr;
}
}  // namespace

TraceBytes::TraceBytes(const uint8_t* map, size_t size) : data_(map), size_(size), mapped_(true) {
  guard_ = GuardMapping(map, size);
}

TraceBytes::~TraceBytes() {
  if (guard_ != nullptr) static_cast<Guard*>(guard_)->lo = 0;
  if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
}

std::optional<uint64_t> TraceBytes::CutAt() const {
  if (guard_ == nullptr) return std::nullopt;
  const uintptr_t cut = static_cast<const Guard*>(guard_)->cut.load();
  if (cut == UINTPTR_MAX) return std::nullopt;
  // The page before the first that faulted: a cut file's last page reads as zeros past
  // its new end without a fault.
  const uintptr_t start = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t page = static_cast<uintptr_t>(g_page.load());
  return cut >= start + page ? cut - page - start : 0;
}

void TraceBytes::Trim() const {
  if (mapped_) madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

}  // namespace ldscope::store
