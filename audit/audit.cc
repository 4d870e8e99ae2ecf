// The rtld-audit hooks: record every library search, open, close and namespace
// change of the traced process and stream them to the collector. Rules (docs/ARCHITECTURE.md):
// never throw, never abort, no heap, no stdio, bounded waits, and return the value
// that changes nothing whenever anything goes wrong. No libc: system calls through
// sys.h, the environment, clocks and ld.so's facts through process.h.
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "encode.h"
#include "objinfo.h"
#include "process.h"
#include "sys.h"
#include "transport.h"
#include "wire.h"

#define LDSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace ldscope::audit {
namespace {

// Cookies of objects we saw opened carry this tag, the object id and whether the
// object lives in an audit namespace. Other cookies are ld.so's default (the
// link_map address, always below 2^48).
constexpr uintptr_t kCookieTag = uintptr_t{0x1d5c} << 48;
constexpr uintptr_t kCookieTagMask = uintptr_t{0xffff} << 48;
constexpr uintptr_t kAuditBit = 1;

struct Cookie {
  bool ours;
  bool audit;
  uint64_t id;
};

Cookie Decode(const uintptr_t* cookie) {
  if (cookie == nullptr || (*cookie & kCookieTagMask) != kCookieTag) return {false, false, 0};
  const uintptr_t v = *cookie & ~kCookieTagMask;
  return {true, (v & kAuditBit) != 0, static_cast<uint64_t>(v >> 1)};
}

// Spin lock whose holder is a thread (its thread pointer, which needs no system call):
// a child forked while another thread held it sees a foreign owner and takes it over
// instead of waiting forever.
class OwnerLock {
 public:
  bool Lock(uintptr_t self, uint32_t pid, uint32_t owner_pid) {
    for (int spins = 0; spins < 200000; ++spins) {
      uintptr_t expected = 0;
      if (__atomic_compare_exchange_n(&owner_, &expected, self, false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED))
        return true;
      if (pid != owner_pid) {  // forked child: the holder does not exist here
        __atomic_store_n(&owner_, self, __ATOMIC_SEQ_CST);
        return true;
      }
      if (spins > 64) sys::SchedYield();
    }
    return false;  // give up (the event is dropped) rather than hang
  }
  void Unlock() { __atomic_store_n(&owner_, uintptr_t{0}, __ATOMIC_RELEASE); }

 private:
  uintptr_t owner_ = 0;
};

// The events of one loader transaction, framed for the transport, waiting to leave
// together: one datagram or one write instead of one per event (a system call and a
// collector wake-up each, most of ldscope's cost in a process that loads thousands of
// objects). Static storage; guarded by the OwnerLock like the rest of State.
class Batch {
 public:
  static constexpr size_t kBytes = 32 * 1024;
  bool empty() const { return events_ == 0; }
  uint32_t events() const { return events_; }
  const uint8_t* data() const { return buf_; }
  size_t size() const { return len_; }
  // Appends one encoded event; false when it does not fit.
  bool Add(const Transport& t, const uint8_t* event, size_t len) {
    uint8_t head[Transport::kMaxFrameHeader];
    const size_t hn = t.FrameInBatch(head, len);
    if (hn + len > kBytes - len_) return false;
    std::memcpy(buf_ + len_, head, hn);
    std::memcpy(buf_ + len_ + hn, event, len);
    len_ += hn + len;
    ++events_;
    return true;
  }
  void Clear() {
    len_ = 0;
    events_ = 0;
  }

 private:
  uint8_t buf_[kBytes] = {};
  size_t len_ = 0;
  uint32_t events_ = 0;
};

struct State {
  bool active = false;
  uint32_t lav_version = 0;
  Transport transport;
  OwnerLock lock;
  uint32_t pid = 0;               // the image owner; a different getpid() means fork
  uint64_t image_start_ns = 0;
  uint64_t seq = 0;               // next sequence number
  uint64_t dropped = 0;
  uint64_t next_id = 1;
  bool main_seen = false;
  uint64_t main_id = 0;           // the executable's object id: la_activity's cookie for
                                  // the base namespace
  // Inside a loader transaction of the base namespace (from its ADD or DELETE activity
  // to its CONSISTENT), events are held in `batch`; the thread that opened it, and its
  // tid, so that its events need no gettid.
  bool window = false;
  bool window_add = false;        // opened by ADD (else DELETE)
  uintptr_t window_thread = 0;
  uint32_t window_tid = 0;
  bool exited = false;            // the exit event is out: nothing is held any more
  // la_preinit was called: start-up is over. Nothing is held before: when a library the
  // program needs is missing, ld.so prints its error and _exits in the middle of the
  // start-up transaction, and its searches are what the trace is for.
  bool started = false;
  // From la_version to the start-up's CONSISTENT: ld.so maps objects and has run no code
  // but auditors' (relocation, IFUNC resolvers and initialisers come after), so nothing
  // can have closed or reused our descriptor: it is not checked per event.
  bool mapping_startup = false;
  uint64_t audit_lmids = 0;       // bit per namespace id that belongs to auditors
  ProcessAux aux;
  ElfW(Dyn)* vdso_dynamic = nullptr;
  // ld.so's debugger interface for the base namespace (r_state says whether a loader
  // transaction is in progress): where it cannot be found, events are not held.
  const void* r_debug = nullptr;
  const char* glibc_version = "";  // "" when ld.so does not say
  bool ldso_seen = false;
  // Objects opened since the last ADD activity, with the RELRO page ld.so protects
  // once relocation is done: a close that finds it still writable is a roll-back.
  // Read at the first close after the batch, once for all of them: /proc/self/maps
  // is long in big processes and must not be read per close.
  uint64_t recent_id[64] = {};
  uintptr_t recent_relro[64] = {};
  bool recent_writable[64] = {};
  size_t n_recent = 0;
  uint64_t recent_min = 0, recent_max = 0;  // so that most closes skip the search
  bool recent_checked = false;
};

State g;

// The large parts of the state, apart so that they are all-zero and land in .bss: pages
// a process never touches cost it nothing (State, with its few non-zero defaults, is
// file-backed .data, where a touched page is read from the file and then copied).
struct Buffers {
  Batch batch;
  char exe[4096] = {};
  char main_path[4096] = {};      // the executable's file (differs from exe under `ld.so prog`)
  char cmdline[24576] = {};       // most of ProcessStart's 32 KiB budget at most
  size_t cmdline_len = 0;
  bool cmdline_truncated = false;
  uint64_t pid_namespace = 0;
  bool identity_cut = false;      // exe longer than its buffer
  char search_name[4096] = {};    // name of the search in progress (from its ORIG call)
  char cwd[4096] = {};            // for a relative l_name (la_objopen holds the loader lock)
};
Buffers g_buf;

// Candidate directories already sent on this connection, so that later candidates in
// them travel as a small number (a search tries the same few directories for every
// name). Reset with each new connection or file and after any drop, so a reader never
// sees a reference whose definition it did not get.
class DirTable {
 public:
  static constexpr size_t kSlots = 128;
  static constexpr size_t kMaxDir = 255;
  void Reset() {
    used_ = 0;
    next_ = 0;
  }
  // Returns the 1-based ref for dir, and whether this event must define it.
  uint32_t Intern(const char* dir, size_t len, bool* define) {
    for (size_t i = 0; i < used_; ++i) {
      if (len_[i] == len && std::memcmp(text_[i], dir, len) == 0) {
        *define = false;
        return static_cast<uint32_t>(i + 1);
      }
    }
    size_t slot = used_ < kSlots ? used_++ : (next_++ % kSlots);  // full: reuse round robin
    std::memcpy(text_[slot], dir, len);
    len_[slot] = static_cast<uint8_t>(len);
    *define = true;
    return static_cast<uint32_t>(slot + 1);
  }

 private:
  char text_[kSlots][kMaxDir] = {};
  uint8_t len_[kSlots] = {};
  size_t used_ = 0;
  size_t next_ = 0;
};

DirTable g_dirs;

uint64_t NowNs() {
  timespec ts{};
  proc::ClockGettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The main thread's thread pointer (0: not known yet): its tid is the pid. Its TCB is
// ld.so's, never freed or given to another thread while the process lives, so no other
// thread can have that pointer; a forked child forgets it (HandleFork).
uintptr_t g_main_thread = 0;

uint32_t Tid() {
  const uintptr_t tp = sys::ThreadPointer();
  if (tp != 0 && tp == g_main_thread) return g.pid;
  const uint32_t tid = static_cast<uint32_t>(sys::Gettid());
  if (tid == g.pid) g_main_thread = tp;
  return tid;
}

// getcwd(3) from the system call: false when there is no usable path (longer than the
// buffer: *cut, when given, says so; or "(unreachable)", a directory outside this
// process's root, which is no path either).
bool Getcwd(char* buf, size_t cap, bool* cut) {
  const long r = sys::Getcwd(buf, cap);
  if (cut != nullptr) *cut = r == -ERANGE;
  return r > 0 && buf[0] == '/';
}

// The command line as /proc/self/cmdline has it, without opening it (four system calls):
// argv's strings lie back to back on the initial stack, the very bytes the kernel reads
// for that file. Not when ld.so runs as a program (its own arguments are part of the file
// but not of argv) or when anything looks otherwise: then false, and the file is read.
bool CmdlineFromArgv() {
  int argc = 0;
  char* const* argv = proc::Argv(&argc);
  if (g.aux.ldso_base == 0 || argv == nullptr || argc <= 0 || argv[0] == nullptr) return false;
  for (int i = 1; i < argc; ++i)
    if (argv[i] == nullptr || argv[i] != argv[i - 1] + std::strlen(argv[i - 1]) + 1) return false;
  size_t len = 0;
  for (int i = 0; i < argc; ++i) {
    const size_t n = std::strlen(argv[i]) + 1;
    if (n > sizeof g_buf.cmdline - len) {
      g_buf.cmdline_truncated = true;  // whole arguments only, as from the file
      break;
    }
    std::memcpy(g_buf.cmdline + len, argv[i], n);
    len += n;
  }
  g_buf.cmdline_len = len;
  return true;
}

void ReadProcessIdentity() {
  const long n = sys::Readlink("/proc/self/exe", g_buf.exe, sizeof g_buf.exe - 1);
  g_buf.exe[n > 0 ? n : 0] = '\0';
  g_buf.identity_cut = n == static_cast<long>(sizeof g_buf.exe - 1);
  const long opened = CmdlineFromArgv() ? -1 : sys::Open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (opened >= 0) {
    const int fd = static_cast<int>(opened);
    size_t len = 0;
    while (len < sizeof g_buf.cmdline) {
      const long r = sys::Read(fd, g_buf.cmdline + len, sizeof g_buf.cmdline - len);
      if (r <= 0) break;
      len += static_cast<size_t>(r);
    }
    char more;
    if (len == sizeof g_buf.cmdline && sys::Read(fd, &more, 1) == 1) {
      // Keep whole arguments only: the one cut by the buffer's end is left out.
      g_buf.cmdline_truncated = true;
      while (len > 0 && g_buf.cmdline[len - 1] != '\0') --len;
    }
    sys::Close(fd);
    g_buf.cmdline_len = len;
  }
  g_buf.pid_namespace = PidNamespaceIno();
}

ElfW(Dyn)* FindVdsoDynamic(ElfW(Addr) ehdr_addr) {
  if (ehdr_addr == 0) return nullptr;
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(ehdr_addr);
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(ehdr_addr + eh->e_phoff);
  ElfW(Addr) bias = 0;
  bool have_bias = false;
  ElfW(Addr) dyn = 0;
  for (size_t i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD && !have_bias) {
      bias = ehdr_addr + ph[i].p_offset - ph[i].p_vaddr;
      have_bias = true;
    }
    if (ph[i].p_type == PT_DYNAMIC) dyn = ph[i].p_vaddr;
  }
  return have_bias && dyn != 0 ? reinterpret_cast<ElfW(Dyn)*>(bias + dyn) : nullptr;
}

void SendStart(uint32_t reason, int32_t parent_pid, uint64_t parent_image_start_ns,
               uint64_t parent_seq, bool hold = false);

// Opens the connection or file of this image and sends its start event. Where the
// descriptor limit leaves no number the program could not get (Transport::no_room), the
// start event says that the image is not traced, on a descriptor held only for that
// event, and false is returned: nothing else is sent for this image.
bool OpenAndStart(uint32_t reason, int32_t parent_pid = 0, uint64_t parent_image_start_ns = 0, uint64_t parent_seq = 0,
                  bool hold = false) {
  if (g.transport.Open(g.pid, g.image_start_ns)) {
    SendStart(reason, parent_pid, parent_image_start_ns, parent_seq, hold);
    return true;
  }
  if (g.transport.no_room()) {
    SendStart(reason, parent_pid, parent_image_start_ns, parent_seq);
    g.transport.Abandon();
  }
  return false;
}

// Runs with g.lock held. A forked child (same memory, new process) opens its own
// connection; the events its parent was holding are the parent's to send. Returns
// false when the child's events cannot be delivered.
bool HandleFork(uint32_t pid) {
  if (pid == g.pid) return true;
  // Its inherited objects are the parent's open ones before parent_seq; tell the
  // collector so.
  const uint32_t parent_pid = g.pid;
  const uint64_t parent_start = g.image_start_ns;
  const uint64_t parent_seq = g.seq;
  g.transport.Abandon();
  g_buf.batch.Clear();
  g.window = false;
  g_main_thread = 0;
  g.pid = pid;
  g.image_start_ns = NowNs();
  g.seq = 0;
  g_buf.pid_namespace = PidNamespaceIno();  // a child of unshare(CLONE_NEWPID) is in another
  g.dropped = 0;
  return OpenAndStart(2 /* START_FORK */, static_cast<int32_t>(parent_pid), parent_start, parent_seq);
}

// Runs with g.lock held, right before anything is written. Returns false when
// nothing can be delivered.
bool EnsureDescriptor() {
  // A ring needs no descriptor per event: its reader says when it let it go (our
  // connection ended: the program closed it), and a probe at most every
  // ring::kProbeMs finds a dead collector.
  if (g.transport.ring()) {
    if (g.transport.Usable()) return true;
    // What the reader never took (a collector that died after our last probe) is lost.
    const uint64_t unread = g.transport.UnreadRecords();
    if (unread != 0) {
      g.dropped += unread;
      g_dirs.Reset();
    }
    g.transport.Abandon();
    return OpenAndStart(3 /* START_RECONNECT */);
  }
  if (g.transport.dead()) {
    // The collector went away (EPIPE): a collector restarted on the same socket takes
    // this process back at its next event. A dead file stays dead.
    if (g.transport.mode() != Transport::Mode::kSocket) return false;
    g.transport.Abandon();
    return OpenAndStart(3 /* START_RECONNECT */);
  }
  // The program closed or reused our descriptor number: open a new one.
  if (!g.mapping_startup && !g.transport.StillOurs()) return OpenAndStart(3 /* START_RECONNECT */);
  return true;
}

// Called before the exit event. When the connection's queue is full, the events
// dropped since are counted but no event carrying the count would arrive: the trace
// would end early yet say "dropped 0". A fresh connection has a queue of its own, which
// the collector reads once it runs again (the old one's queued events stay readable
// after we close it), so the exit event and its final count reach the trace.
void ReconnectIfStalled() {
  if (g.transport.mode() != Transport::Mode::kSocket || !g.transport.stalled() ||
      g.transport.dead())
    return;
  g.transport.Abandon();
  OpenAndStart(3 /* START_RECONNECT */);
}

// Sends the held events as one datagram (or write). A lost batch counts each of its
// events as dropped; their sequence numbers are the gap a reader sees. Lock held.
// Returns false when held events were lost.
bool FlushBatch() {
  if (g_buf.batch.empty()) return true;
  const uint32_t n = g_buf.batch.events();
  const bool sent = EnsureDescriptor() &&
                    g.transport.SendBatch(g_buf.batch.data(), g_buf.batch.size()) == Transport::Result::kSent;
  g_buf.batch.Clear();
  if (!sent) {
    g.dropped += n;
    g_dirs.Reset();  // definitions in the lost batch never arrived
  }
  return sent;
}

// The head of the next event of this process image (takes its sequence number).
EventHead NextHead(uint32_t tid) {
  EventHead h;
  h.pid = g.pid;
  h.tid = tid;
  h.seq = g.seq++;
  h.mono_ns = NowNs();
  h.image_start_ns = g.image_start_ns;
  h.dropped = g.dropped;
  return h;
}

// Where events are encoded: static (in .bss), not on the stack. Buffers of 16 and 32 KiB
// on the stack reached pages of it that nothing else touches, a page fault each in every
// traced process (bench/perproc). Every use is under g.lock, or before any other thread
// exists (the start event in la_version), and an event's bytes are sent or copied into
// the batch before the lock is let go. The start event has its own buffer: it can be
// encoded (a reconnect, a fork) while a held event waits in `event`.
struct EncodeBuffers {
  static constexpr size_t kEvent = 16384, kStart = 32768;
  uint8_t event[Transport::kPrefixRoom + kEvent];
  uint8_t start[Transport::kPrefixRoom + kStart];
};
EncodeBuffers g_encode;

template <size_t N, typename Encode>
void EncodeAndSend(Encode&& encode, uint8_t* buf, uint32_t tid = Tid()) {
  wire::Writer w(buf + Transport::kPrefixRoom, N);
  const EventHead h = NextHead(tid);
  encode(w, h);
  if (g.transport.Send(buf + Transport::kPrefixRoom, w.size()) != Transport::Result::kSent) {
    ++g.dropped;
    g_dirs.Reset();
  }
}

void SendStart(uint32_t reason, int32_t parent_pid, uint64_t parent_image_start_ns,
               uint64_t parent_seq, bool hold) {
  g_dirs.Reset();  // a new connection or file knows no directories yet
  char cwd[4096];
  bool cwd_cut = false;
  if (!Getcwd(cwd, sizeof cwd, &cwd_cut)) cwd[0] = '\0';  // cut: sent empty, and said so
  const auto encode = [&](ldscope::wire::Writer& w, const EventHead& h) {
    ProcessStartInfo p;
    p.reason = reason;
    p.ppid = static_cast<int32_t>(sys::Getppid());
    p.exe = g_buf.exe;
    p.cmdline = g_buf.cmdline;
    p.cmdline_len = g_buf.cmdline_len;
    p.cmdline_truncated = g_buf.cmdline_truncated;
    p.pid_namespace = g_buf.pid_namespace;
    p.cwd = cwd;
    p.glibc_version = g.glibc_version;
    p.environ = proc::Environ();
    p.image_start_ns = g.image_start_ns;
    p.parent_pid = parent_pid;
    p.parent_image_start_ns = parent_image_start_ns;
    p.parent_seq_at_fork = parent_seq;
    p.lav_version = g.lav_version;
    p.secure = proc::Aux(AT_SECURE) != 0;
    p.cut = g_buf.identity_cut || cwd_cut;
    const char* keep = proc::Getenv("LDSCOPE_KEEP_ARGV");
    p.keep_argv = keep != nullptr && keep[0] == '1' && keep[1] == '\0';
    if (g.transport.no_room()) {
      p.not_traced = 1;  // NOT_TRACED_DESCRIPTOR_LIMIT
      p.fd_limit = g.transport.fd_limit();
    }
    EncodeProcessStart(w, h, p);
  };
  uint8_t* buf = g_encode.start;
  if (!hold || g.transport.ring()) {
    EncodeAndSend<EncodeBuffers::kStart>(encode, buf);
    return;
  }
  // Held (see Delivery::kStartup) when it fits a batch, else sent now.
  wire::Writer w(buf + Transport::kPrefixRoom, EncodeBuffers::kStart);
  const EventHead h = NextHead(g.pid);
  encode(w, h);
  if (g_buf.batch.Add(g.transport, w.data(), w.size())) return;
  if (g.transport.Send(buf + Transport::kPrefixRoom, w.size()) != Transport::Result::kSent) {
    ++g.dropped;
    g_dirs.Reset();
  }
}

// Fork detection without a system call per event: a page that the kernel zeroes in a
// forked child (MADV_WIPEONFORK). Where that is not available, getpid() each time.
// qemu-user answers every madvise with success and does nothing (the child would keep
// the marker and pass for its parent): an advice no kernel knows must fail first.
volatile uint32_t* g_fork_marker = nullptr;

void SetUpForkMarker() {
  void* p = sys::Mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (sys::MmapFailed(p)) return;
  constexpr int kNoSuchAdvice = 0x7ead;
  if (sys::Madvise(p, 4096, kNoSuchAdvice) == 0 || sys::Madvise(p, 4096, MADV_WIPEONFORK) != 0) {
    sys::Munmap(p, 4096);
    return;
  }
  g_fork_marker = static_cast<volatile uint32_t*>(p);
  *g_fork_marker = g.pid;
}

uint32_t CurrentPid() {
  if (g_fork_marker != nullptr && *g_fork_marker == g.pid) return g.pid;
  const uint32_t pid = static_cast<uint32_t>(sys::Getpid());
  if (g_fork_marker != nullptr) *g_fork_marker = pid;  // the new process's own marker
  return pid;
}

// Whether a loader transaction of the base namespace is in progress. ld.so sets
// r_state back to RT_CONSISTENT when it ends one, also where it gives up on a failed
// load without telling the auditors (older glibc's lose() after LA_ACT_ADD): then the
// held events go at the next hook instead of waiting for a CONSISTENT that never comes.
bool BaseTransactionOpen() {
  const auto* r = static_cast<const r_debug*>(g.r_debug);
  if (r == nullptr) return false;
  const volatile auto* state = &r->r_state;  // written by the thread in the transaction
  return *state != r_debug::RT_CONSISTENT;
}

// Never 0 (the lock's "free"): the thread pointer is an aligned address.
uintptr_t Self() { return sys::ThreadPointer() | 1; }

// How an event travels: as it happens (kNow), or held with the rest of its loader
// transaction until the transaction's CONSISTENT (kOpenAdd / kOpenDelete start holding,
// kClose ends it). kFinal (the exit event) sends everything held, then itself, and holds
// nothing after. kStartup: an event of the start of a process image that ld.so always
// follows with another hook (the executable's, ld.so's and the vDSO's objopen, the
// start-up ADD; the process-start event too): held until that next event, which sends
// it along. Searches, other objects and the start-up CONSISTENT are never held that
// way: ld.so may print its error and _exit after any of them (a missing library, a
// missing symbol version, an unresolved symbol).
enum class Delivery { kNow, kOpenAdd, kOpenDelete, kClose, kFinal, kStartup };

// Whether an event that is not a transaction's ADD, DELETE or CONSISTENT is held. A
// DELETE always reaches its CONSISTENT (dlclose, a failed dlopen's roll-back, and at
// exit _dl_fini, whose closes are the transaction: r_state stays RT_CONSISTENT there).
// An ADD does not on older glibc when loading the dlopen'ed object itself fails (lose()
// resets r_state without telling auditors), so ADD windows hold only while ld.so's
// r_state says the transaction is open.
bool WindowStillOpen() { return g.window && (!g.window_add || BaseTransactionOpen()); }

// Whether an event that fits a batch by itself, delivered `how`, is held in the batch
// rather than sent: inside a base-namespace loader transaction (an ADD or DELETE opens
// the window, and the event that closes it is the last one held), or at start-up before
// the first search. Into a ring nothing is held: an event there costs no system call,
// and is kept whatever happens to the process next. The library's lock is held.
bool Hold(Delivery how, uintptr_t self) {
  if (g.exited || g.transport.ring()) return false;
  if (how == Delivery::kOpenAdd || how == Delivery::kOpenDelete) {
    if (!g.window) {
      g.window = true;
      g.window_thread = self;
      g.window_tid = Tid();
    }
    g.window_add = how == Delivery::kOpenAdd;
    return true;
  }
  if (how == Delivery::kClose) return g.window;
  if (how == Delivery::kNow) return WindowStillOpen();
  if (how == Delivery::kStartup) return !g.started;
  return false;
}

// An encoded event into the batch. Full: send what is held, start a new batch with this
// event (it fits an empty one: only such events are held). When the held batch was
// lost, this event may refer to a directory only that batch defined: it is dropped too
// (and counted) rather than reach a reader with a reference the reader cannot resolve.
// The library's lock is held.
void AddToBatch(const wire::Writer& w) {
  if (g_buf.batch.Add(g.transport, w.data(), w.size())) return;
  if (FlushBatch())
    g_buf.batch.Add(g.transport, w.data(), w.size());
  else
    ++g.dropped;
}

// The common path of every hook after it decided to record something. Events are held
// only inside a base-namespace loader transaction (see WindowStillOpen); anything else (a
// search for a dlopen that finds nothing, the exit event, events of other namespaces)
// first sends what is held, then itself.
template <size_t N, typename Encode>
void Record(Encode&& encode, Delivery how = Delivery::kNow) {
  const uint32_t pid = CurrentPid();
  const uintptr_t self = Self();
  if (!g.lock.Lock(self, pid, g.pid)) {
    __atomic_fetch_add(&g.dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  if (!HandleFork(pid)) {
    ++g.seq;
    ++g.dropped;
    g.lock.Unlock();
    return;
  }
  // Only events that fit a batch by themselves are ever held.
  constexpr bool kHoldable = N + Transport::kMaxFrameHeader <= Batch::kBytes;
  const bool hold = kHoldable && Hold(how, self);
  if (!hold) {
    g.window = false;
    FlushBatch();  // what is held goes first: the stream stays in sequence order
  }
  if (how == Delivery::kFinal) {
    g.exited = true;
    ReconnectIfStalled();
  }
  if (hold ? g.transport.dead() : !EnsureDescriptor()) {
    ++g.seq;
    ++g.dropped;
    if (how == Delivery::kClose) {
      g.window = false;
      FlushBatch();  // cannot be sent either: counts what it held
    }
    g.lock.Unlock();
    return;
  }
  // Before la_preinit no thread but the initial one exists (tid == pid).
  const uint32_t tid = !g.started ? g.pid : hold && self == g.window_thread ? g.window_tid : Tid();
  static_assert(N <= EncodeBuffers::kEvent, "an event fits g_encode.event");
  uint8_t* buf = g_encode.event;
  if (!hold) {
    EncodeAndSend<N>(encode, buf, tid);
    g.lock.Unlock();
    return;
  }
  wire::Writer w(buf + Transport::kPrefixRoom, N);
  const EventHead h = NextHead(tid);
  encode(w, h);
  AddToBatch(w);
  if (how == Delivery::kClose) {
    g.window = false;
    FlushBatch();
  }
  g.lock.Unlock();
}

uintptr_t MakeCookie(uint64_t id, bool audit) {
  return kCookieTag | (static_cast<uintptr_t>(id) << 1) | (audit ? kAuditBit : 0);
}

bool AuditNamespace(Lmid_t lmid) {
  return lmid >= 0 && lmid < 64 && (g.audit_lmids & (uint64_t{1} << lmid)) != 0;
}

const char* ErrnoName(int e) {
  switch (e) {
    case ENOENT: return "ENOENT: no such directory";
    case ENOTDIR: return "ENOTDIR: not a directory";
    case EACCES: return "EACCES: permission denied";
    case EPERM: return "EPERM: operation not permitted";
    case EROFS: return "EROFS: read-only file system";
    case ENOSPC: return "ENOSPC: no space left on device";
    case EDQUOT: return "EDQUOT: disk quota exceeded";
    case EMFILE: return "EMFILE: too many open files";
    case ENAMETOOLONG: return "ENAMETOOLONG: file name too long";
    default: return nullptr;
  }
}

// Whether our parent started with the same LDSCOPE_DIR=dir entry in its environment:
// then it was traced into the same directory and has said so already (one line per
// process tree, not one per process). Reads /proc/PPID/environ in fixed chunks.
bool ParentHasSameDir(const char* dir) {
  char path[48] = "/proc/";
  char num[16];
  size_t k = sizeof num;
  unsigned v = static_cast<unsigned>(sys::Getppid());
  do {
    num[--k] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && k > 0);
  size_t n = 6;
  for (; k < sizeof num; ++k) path[n++] = num[k];
  std::memcpy(path + n, "/environ", sizeof "/environ");
  const long opened = sys::Open(path, O_RDONLY | O_CLOEXEC);
  if (opened < 0) return false;
  const int fd = static_cast<int>(opened);
  static const char kName[] = "LDSCOPE_DIR=";
  const size_t name_len = sizeof kName - 1, dir_len = std::strlen(dir);
  // matched: bytes of "LDSCOPE_DIR=<dir>" matched in the current entry; -1: no match.
  long matched = 0;
  bool found = false;
  char buf[4096];
  for (long r; !found && (r = sys::Read(fd, buf, sizeof buf)) > 0;) {
    for (long i = 0; i < r && !found; ++i) {
      const char c = buf[i];
      if (c == '\0') {
        found = matched == static_cast<long>(name_len + dir_len);
        matched = 0;
        continue;
      }
      if (matched < 0) continue;
      const size_t at = static_cast<size_t>(matched);
      const char want = at < name_len ? kName[at] : at < name_len + dir_len ? dir[at - name_len] : '\0';
      matched = want != '\0' && c == want ? matched + 1 : -1;
    }
  }
  sys::Close(fd);
  return found;
}

// LDSCOPE_DIR is only ever set by a person who wants traces: when it cannot take one,
// say so on stderr (one write(2); no stdio, no locale), once per process tree,
// rather than leave them with no trace and no reason. The only output the audit
// library ever makes in a traced program.
void ReportUnusableDir(const char* dir, int err) {
  char msg[4096 + 160];
  size_t n = 0;
  auto put = [&](const char* s) {
    for (; *s != '\0' && n < sizeof msg - 1; ++s) msg[n++] = *s;
  };
  put("ldscope: cannot create a trace file in LDSCOPE_DIR=");
  put(dir);
  put(" (");
  if (const char* name = ErrnoName(err)) {
    put(name);
  } else {
    char num[16];
    size_t k = sizeof num;
    num[--k] = '\0';
    unsigned v = static_cast<unsigned>(err);
    do {
      num[--k] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0 && k > 0);
    put("errno ");
    put(num + k);
  }
  put("); this process is not traced\n");
  sys::Write(2, msg, n);
}

}  // namespace
}  // namespace ldscope::audit

using namespace ldscope::audit;

// The rtld-audit interface version ldscope implements, whatever LAV_CURRENT the headers
// it was built with say: it exports none of the hooks whose ABI version 2 changed
// (la_symbind*, la_*_gnu_pltenter), so 1 and 2 are both right. la_version answers the
// loader's offer capped at this: glibc before 2.35 offers 1 and ignores an auditor
// answering more; aarch64 glibc 2.35+ offers 2 and accepts exactly 2.
constexpr unsigned int kLavSupported = 2;

LDSCOPE_EXPORT unsigned int la_version(unsigned int version) {
  if (version == 0) return 0;
  // The library's initialiser found the environment (else it stays inert).
  if (proc::Environ() == nullptr) return 0;
  const char* sock = proc::Getenv("LDSCOPE_SOCKET");
  const char* dir = proc::Getenv("LDSCOPE_DIR");
  // Setuid/setgid programs: stay inert (glibc normally keeps us out anyway).
  if (proc::Aux(AT_SECURE) != 0) return 0;
  const char* how = proc::Getenv("LDSCOPE_TRANSPORT");
  // Datagrams unless asked for the ring: on fork/exec-heavy work (a shell loop, make) a
  // ring's set-up costs a short-lived process and the collector more than the few
  // datagrams it saves (bench/RESULTS.md, "The ring against datagrams").
  const bool datagrams = how == nullptr || std::strcmp(how, "ring") != 0;
  if (!g.transport.Configure(sock, dir, datagrams)) return 0;  // nobody listening: no overhead
  g.pid = static_cast<uint32_t>(sys::Getpid());
  g.image_start_ns = NowNs();
  g.aux.vdso_ehdr = proc::Aux(AT_SYSINFO_EHDR);
  g.aux.ldso_base = proc::Aux(AT_BASE);
  g.aux.main_phdr = proc::Aux(AT_PHDR);
  g.aux.main_phnum = proc::Aux(AT_PHNUM);
  if (proc::Aux(AT_PAGESZ) != 0) g.aux.page_size = proc::Aux(AT_PAGESZ);
  g.vdso_dynamic = FindVdsoDynamic(g.aux.vdso_ehdr);
  ReadProcessIdentity();
  const proc::Loader& ldso = proc::FindLoader(
      g.aux.ldso_base != 0 ? g.aux.ldso_base : MappingStart(g_buf.exe), g_buf.exe);
  g.r_debug = ldso.r_debug;
  g.glibc_version = ldso.glibc_version;
  g.transport.set_glibc_version(ldso.glibc_version);
  // ld.so run as a program: /proc/self/exe is ld.so; the program is what is mapped
  // at AT_PHDR.
  if (g.aux.ldso_base != 0 || !MappedFile(g.aux.main_phdr, g_buf.main_path, sizeof g_buf.main_path))
    std::memcpy(g_buf.main_path, g_buf.exe, strnlen(g_buf.exe, sizeof g_buf.exe - 1) + 1);
  g.lav_version = version;
  if (!OpenAndStart(1 /* START_EXEC */, 0, 0, 0, /*hold=*/true)) {
    const int err = g.transport.error();
    if (g.transport.mode() == Transport::Mode::kDir && !g.transport.no_room() && !ParentHasSameDir(dir))
      ReportUnusableDir(dir, err);
    return 0;
  }
  SetUpForkMarker();
  g.active = true;
  g.mapping_startup = true;
  return version < kLavSupported ? version : kLavSupported;
}

LDSCOPE_EXPORT char* la_objsearch(const char* name, uintptr_t* cookie, unsigned int flag) {
  if (!g.active || name == nullptr) return const_cast<char*>(name);
  const Cookie c = Decode(cookie);
  if (c.audit || (!c.ours && !g.main_seen)) return const_cast<char*>(name);
  if (flag == LA_SER_ORIG) {
    const size_t n = strnlen(name, sizeof g_buf.search_name - 1);
    std::memcpy(g_buf.search_name, name, n);
    g_buf.search_name[n] = '\0';
    Record<8192>([&](ldscope::wire::Writer& w, const EventHead& h) {
      SearchInfo s;
      s.name = name;
      s.flag = flag;
      s.requester = c.id;
      EncodeSearch(w, h, s);
    });
  } else {
    // The name is on the ORIG event just before; the candidate travels as an interned
    // directory plus, when it is not the name, the file name.
    Record<8192>([&](ldscope::wire::Writer& w, const EventHead& h) {
      SearchInfo s;
      s.flag = flag;
      s.requester = c.id;
      const char* slash = std::strrchr(name, '/');
      const size_t dir_len = slash != nullptr ? static_cast<size_t>(slash - name) : 0;
      if (slash == nullptr || dir_len == 0 || dir_len > DirTable::kMaxDir) {
        s.candidate = name;
      } else {
        bool define = false;
        s.dir_ref = g_dirs.Intern(name, dir_len, &define);
        if (define) {
          s.dir = name;
          s.dir_len = dir_len;
        }
        if (std::strcmp(slash + 1, g_buf.search_name) != 0) s.base = slash + 1;
      }
      EncodeSearch(w, h, s);
    });
  }
  return const_cast<char*>(name);
}

LDSCOPE_EXPORT unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  if (!g.active || map == nullptr || cookie == nullptr) return 0;
  const bool is_main = !g.main_seen && lmid == LM_ID_BASE &&
                       (map->l_name == nullptr || map->l_name[0] == '\0');
  if (!g.main_seen && !is_main) {
    // Before the executable's objopen, only auditors' namespaces are being built.
    if (lmid >= 0 && lmid < 64) g.audit_lmids |= uint64_t{1} << lmid;
  }
  const uint64_t id = __atomic_fetch_add(&g.next_id, 1, __ATOMIC_RELAXED);
  if (is_main) {
    g.main_seen = true;
    g.main_id = id;
  }
  const bool audit = AuditNamespace(lmid);
  *cookie = MakeCookie(id, audit);
  if (audit) return 0;
  const bool is_vdso = g.vdso_dynamic != nullptr && map->l_ld == g.vdso_dynamic;
  // ld.so is opened right after the executable; AT_BASE names it, except when ld.so
  // was run as a program (AT_BASE is 0): then it is the first object after it.
  const bool is_ldso = !is_main && lmid == LM_ID_BASE && !g.ldso_seen &&
                       (g.aux.ldso_base != 0 ? map->l_addr == g.aux.ldso_base : true);
  if (is_ldso) g.ldso_seen = true;
  // The executable, ld.so and the vDSO are mapped before any search: another hook follows.
  const Delivery how = !g.started && (is_main || is_ldso || is_vdso) ? Delivery::kStartup : Delivery::kNow;

  Record<16384>([&](ldscope::wire::Writer& w, const EventHead& h) {
    ObjectInfo o;
    o.id = id;
    o.lmid = lmid;
    o.base = map->l_addr;
    o.is_main = is_main;
    o.path = is_main ? g_buf.main_path : map->l_name;
    o.is_vdso = is_vdso;
    o.is_ldso = is_ldso;
    if (!o.is_vdso && o.path != nullptr && o.path[0] != '\0') {
      struct stat st;
      if (sys::Stat(o.path, &st) == 0) {
        o.dev = st.st_dev;
        o.ino = st.st_ino;
      }
    }
    if (o.path != nullptr && o.path[0] != '\0' && o.path[0] != '/' && !o.is_vdso &&
        Getcwd(g_buf.cwd, sizeof g_buf.cwd, nullptr))
      o.cwd = g_buf.cwd;
    ReadMappedObject(map, is_main, g.aux, &o);
    if (o.relro_start != 0 && g.n_recent < sizeof g.recent_id / sizeof g.recent_id[0]) {
      if (g.n_recent == 0 || id < g.recent_min) g.recent_min = id;
      if (g.n_recent == 0 || id > g.recent_max) g.recent_max = id;
      g.recent_id[g.n_recent] = id;
      g.recent_relro[g.n_recent++] = o.relro_start;
    }
    EncodeObjOpen(w, h, o);
  }, how);
  return 0;
}

LDSCOPE_EXPORT unsigned int la_objclose(uintptr_t* cookie) {
  if (!g.active) return 0;
  const Cookie c = Decode(cookie);
  if (!c.ours || c.audit) return 0;
  bool unrelocated = false;
  const bool maybe_recent = g.n_recent > 0 && c.id >= g.recent_min && c.id <= g.recent_max;
  for (size_t i = 0; maybe_recent && i < g.n_recent; ++i) {
    if (g.recent_id[i] != c.id) continue;
    if (!g.recent_checked) {
      PagesWritable(g.recent_relro, g.recent_writable, g.n_recent);
      g.recent_checked = true;
    }
    unrelocated = g.recent_writable[i];
    break;
  }
  Record<256>([&](ldscope::wire::Writer& w, const EventHead& h) {
    EncodeObjClose(w, h, c.id, unrelocated);
  });
  return 0;
}

LDSCOPE_EXPORT void la_activity(uintptr_t* cookie, unsigned int flag) {
  if (!g.active) return;
  const Cookie c = Decode(cookie);
  if (c.audit || (!c.ours && !g.main_seen)) return;
  if (flag == LA_ACT_ADD) {
    g.n_recent = 0;
    g.recent_checked = false;
  }
  // The base namespace's transactions after start-up are held and sent whole (its head
  // is the executable); other namespaces' events go as they happen. An ADD is held only
  // where ld.so's r_state can tell when it ended (see WindowStillOpen).
  Delivery how = Delivery::kNow;
  if (g.started && c.ours && g.main_id != 0 && c.id == g.main_id) {
    if (flag == LA_ACT_CONSISTENT)
      how = Delivery::kClose;
    else if (flag == LA_ACT_DELETE)
      how = Delivery::kOpenDelete;
    else if (flag == LA_ACT_ADD && g.r_debug != nullptr)
      how = Delivery::kOpenAdd;
  } else if (!g.started && flag == LA_ACT_ADD && c.ours && g.main_id != 0 && c.id == g.main_id) {
    how = Delivery::kStartup;  // the start-up's: objects or their searches follow
  }
  Record<256>([&](ldscope::wire::Writer& w, const EventHead& h) {
    EncodeActivity(w, h, flag, c.id);
  }, how);
  if (flag == LA_ACT_CONSISTENT) g.mapping_startup = false;
}

LDSCOPE_EXPORT void la_preinit(uintptr_t* /*cookie*/) {
  if (!g.active) return;
  Record<256>([&](ldscope::wire::Writer& w, const EventHead& h) { EncodePreinit(w, h); });
  g.started = true;
  g.mapping_startup = false;
  // ld.so relocated every object of the start-up and made its RELRO read-only before
  // this hook (a failure there is fatal), so none of their closes can be a roll-back:
  // the exit's closes need no look at the mappings.
  g.n_recent = 0;
}

// At a normal exit (not _exit or a crash), report the final drop count.
__attribute__((destructor)) static void OnUnload() {
  if (!g.active) return;
  Record<256>([&](ldscope::wire::Writer& w, const EventHead& h) { EncodeExit(w, h); },
              Delivery::kFinal);
}
