// Static TLS (docs/LOADER.md, "Static TLS"): an object with initial-exec TLS
// (DF_STATIC_TLS) loaded after start-up must fit its PT_TLS block into the surplus glibc
// left in every thread's static TLS block when the program started; a dlopen that does
// not fit fails with "cannot allocate memory in static TLS block". This pass lays the
// block out as glibc does (_dl_determine_tlsoffset and _dl_try_allocate_static_tls in
// elf/dl-tls.c, x86-64's layout: the TLS blocks below the thread pointer) from each
// object's PT_TLS and DT_FLAGS, with the surplus glibc computes from GLIBC_TUNABLES
// (glibc.rtld.nns, glibc.rtld.optional_static_tls) and the number of LD_AUDIT modules:
// - a failed dlopen whose object does not fit: STATIC_TLS_EXHAUSTED, error;
// - a process whose late objects fit only because ldscope's own audit module enlarged
//   the surplus: the same kind, warning (without tracing, that dlopen fails).
#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "text/escape.h"
#include "loader/search.h"

namespace ldscope::analysis {
namespace {

constexpr uint64_t kDfStaticTls = 0x10;  // DT_FLAGS' DF_STATIC_TLS
constexpr uint64_t kTcbAlign = 64;       // x86-64's TCB alignment, the block's least alignment
constexpr const char* kAuditLibrary = "libldscope_audit.so";

uint64_t RoundUp(uint64_t v, uint64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

// "1,824 bytes".
std::string Bytes(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out + " bytes";
}

// One object's thread-local block, as ld.so sizes it.
struct Block {
  const Obj* o = nullptr;
  uint64_t size = 0, align = 1, first_byte = 0;  // p_memsz, p_align, p_vaddr % p_align
  bool initial_exec = false;                     // DF_STATIC_TLS
};

// What sizes the surplus: glibc's version, its tunables, the audit modules.
struct Params {
  int major = 0, minor = 0;
  uint64_t nns = 4, optional = 512;  // glibc.rtld.nns, glibc.rtld.optional_static_tls
  bool nns_set = false, optional_set = false;
  std::string tunables;          // GLIBC_TUNABLES as recorded
  size_t naudit = 0;             // LD_AUDIT modules (ldscope's own among them)
  bool traced_by_audit = false;  // ldscope's audit module is one of them
  // The tunables and the per-namespace surplus came with glibc 2.32, and were backported
  // to the 2.31 of Debian bullseye (measured there); earlier, a fixed 1664 bytes.
  bool tunables_supported() const { return major > 2 || (major == 2 && minor >= 31); }
  // glibc's dl_tls_static_surplus: per namespace (rtld.nns plus one per audit module)
  // room for libc.so's initial-exec TLS (not the first namespace's: 192 bytes measured on
  // 2.31, 144 on 2.36 and 2.41; the versions between are taken as 2.31 up to 2.34) and 144
  // for other libraries', the optional part, and what keeps the default at the historic
  // 1664.
  uint64_t Surplus(size_t audit_modules) const {
    if (!tunables_supported()) return 1664;
    const uint64_t libc_ie = major == 2 && minor < 35 ? 192 : 144, other_ie = 144;
    const uint64_t legacy = 1664 - (3 * libc_ie + 4 * other_ie + 512);
    const uint64_t n = std::min<uint64_t>(nns, 16) + audit_modules;
    return (n - 1) * libc_ie + n * other_ie + optional + legacy;
  }
  // The block glibc 2.41 appends to the start-up layout for the rseq area (the "extra
  // TLS": _dl_extra_tls_get_size), measured as 32 bytes aligned to 32; none before.
  uint64_t extra_size() const { return major > 2 || (major == 2 && minor >= 41) ? 32 : 0; }
  uint64_t extra_align() const { return extra_size() > 0 ? 32 : 1; }
};

std::optional<uint64_t> ParseNumber(std::string_view v) {
  uint64_t out = 0;
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    v.remove_prefix(2);
    base = 16;
  }
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
  if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return out;
}

Params ParamsOf(const v1::ProcessTimeline& p) {
  Params r;
  const std::string& v = p.glibc_version();
  auto [q, ec] = std::from_chars(v.data(), v.data() + v.size(), r.major);
  if (ec == std::errc() && q != v.data() + v.size() && *q == '.') std::from_chars(q + 1, v.data() + v.size(), r.minor);
  r.tunables = EnvOf(p, "GLIBC_TUNABLES");
  for (const auto& item : loader::SplitPath(r.tunables, ":")) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = item.substr(0, eq);
    const auto value = ParseNumber(std::string_view(item).substr(eq + 1));
    if (!value) continue;
    if (name == "glibc.rtld.nns" && *value >= 1) r.nns = *value, r.nns_set = true;
    if (name == "glibc.rtld.optional_static_tls") r.optional = *value, r.optional_set = true;
  }
  for (const auto& m : loader::SplitPath(EnvOf(p, "LD_AUDIT"), ":")) {
    ++r.naudit;
    if (BaseName(m) == kAuditLibrary) r.traced_by_audit = true;
  }
  return r;
}

// The static TLS block of one process, laid out as glibc lays it out.
class Layout {
 public:
  // Start-up: the blocks glibc places before the first thread exists (TLS_TCB_AT_TP's
  // loop of _dl_determine_tlsoffset, with its reuse of alignment gaps), then the surplus.
  void Startup(const std::vector<Block>& blocks, uint64_t surplus, uint64_t extra_size, uint64_t extra_align) {
    uint64_t max_align = kTcbAlign, freetop = 0, freebottom = 0, offset = 0;
    for (const Block& b : blocks) {
      const uint64_t align = std::max<uint64_t>(b.align, 1);
      const uint64_t firstbyte = (-b.first_byte) & (align - 1);
      max_align = std::max(max_align, align);
      if (freebottom - freetop >= b.size) {
        const uint64_t off = RoundUp(freetop + b.size - firstbyte, align) + firstbyte;
        if (off <= freebottom) {
          freetop = off;
          continue;
        }
      }
      const uint64_t off = RoundUp(offset + b.size - firstbyte, align) + firstbyte;
      if (off > offset + b.size + (freebottom - freetop)) {
        freetop = offset;
        freebottom = off - b.size;
      }
      offset = off;
    }
    max_align = std::max(max_align, extra_align);
    offset = RoundUp(offset, extra_align) + extra_size;
    used_ = offset;
    top_ = RoundUp(offset + surplus, max_align);
    max_align_ = max_align;
  }
  uint64_t free() const { return top_ - used_; }
  // A block placed later (_dl_try_allocate_static_tls): false when it does not fit.
  bool Place(const Block& b) {
    const uint64_t align = std::max<uint64_t>(b.align, 1);
    if (align > max_align_) return false;
    const uint64_t freebytes = top_ - used_, blsize = b.size + b.first_byte;
    if (freebytes < blsize) return false;
    const uint64_t n = (freebytes - blsize) / align;
    used_ += freebytes - n * align - b.first_byte;
    return true;
  }

 private:
  uint64_t used_ = 0, top_ = 0, max_align_ = kTcbAlign;
};

// A process's blocks in the order glibc places them.
struct Plan {
  std::vector<Block> startup;  // laid out by _dl_determine_tlsoffset
  // Start-up objects with initial-exec TLS placed from the surplus: with an audit module,
  // glibc lays out the static block before it loads the program's libraries (rtld.c's
  // init_tls for the audit modules), so their TLS is placed as late objects' is.
  std::vector<Block> startup_late;
  struct Late {
    Block block;
    const v1::Entry* failed = nullptr;  // the failed dlopen it was rolled back with
  };
  std::vector<Late> late;  // objects with initial-exec TLS loaded after start-up
};

class Pass {
 public:
  Pass(Context& ctx, v1::Report* out) : ctx_(ctx), out_(out) {}

  void Run() {
    for (const auto& pi : ctx_.processes()) Process(pi);
  }

 private:
  bool BlockOf(const Obj& o, Block* b) {
    const elf::ElfInfo* info = ctx_.File(o.path);
    if (info == nullptr) return false;
    b->o = &o;
    b->size = info->tls_size;
    b->align = info->tls_align;
    b->first_byte = info->tls_first_byte;
    b->initial_exec = (info->dt_flags & kDfStaticTls) != 0;
    return true;
  }

  // False when a file could not be read (the layout is then unknown).
  bool MakePlan(const ProcessIndex& pi, bool audit, Plan* plan) {
    uint64_t first_dlopen = UINT64_MAX;
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() == v1::LOAD_DLOPEN) first_dlopen = std::min(first_dlopen, o.open_seq);
    std::vector<const Obj*> objs;
    for (const auto& [id, o] : pi.objects)
      if (o.load != nullptr && o.load->reason() != v1::LOAD_VDSO && !o.path.empty()) objs.push_back(&o);
    std::sort(objs.begin(), objs.end(), LoadedBefore);
    // Which failed dlopen rolled each object back.
    std::map<uint64_t, const v1::Entry*> failed;
    for (const v1::Entry* e : pi.entries)
      if (e->has_failed_dlopen())
        for (const auto& r : e->failed_dlopen().rolled_back()) failed[r.id()] = e;
    for (const Obj* o : objs) {
      Block b;
      if (!BlockOf(*o, &b)) return false;
      if (b.size == 0) continue;
      const v1::LoadReason r = o->load->reason();
      const bool startup =
          o->lmid == 0 && o->open_seq < first_dlopen &&
          (r == v1::LOAD_EXECUTABLE || r == v1::LOAD_NEEDED || r == v1::LOAD_PRELOAD || r == v1::LOAD_INTERPRETER);
      if (startup) {
        if (!audit || r == v1::LOAD_EXECUTABLE)
          plan->startup.push_back(b);
        else if (b.initial_exec)
          plan->startup_late.push_back(b);
        continue;
      }
      if (!b.initial_exec) continue;  // dynamic TLS (__tls_get_addr): no static TLS
      auto it = failed.find(o->id);
      plan->late.push_back({b, it == failed.end() ? nullptr : it->second});
    }
    // Relocated last-loaded first (rtld.c relocates the search list backwards).
    std::reverse(plan->startup_late.begin(), plan->startup_late.end());
    return true;
  }

  enum class Mode {
    kFailed,           // the dlopen failed, and fails without tracing too
    kHiddenByTracing,  // it loaded, and fails without tracing
    kCausedByTracing,  // it failed, and loads without tracing
  };

  struct Outcome {
    uint64_t free_after_startup = 0;
    size_t failed_at = SIZE_MAX;  // index into late of the first that does not fit
    uint64_t free_then = 0;       // what was left when it did not fit
  };

  static Outcome Simulate(const Plan& plan, const Params& p, uint64_t surplus) {
    Outcome out;
    Layout l;
    l.Startup(plan.startup, surplus, p.extra_size(), p.extra_align());
    for (const Block& b : plan.startup_late)
      if (!l.Place(b)) return out;  // the program could not have started: not this pass's
    out.free_after_startup = l.free();
    for (size_t i = 0; i < plan.late.size(); ++i) {
      const uint64_t before = l.free();
      if (!l.Place(plan.late[i].block)) {
        out.failed_at = i;
        out.free_then = before;
        return out;
      }
    }
    return out;
  }

  void Process(const ProcessIndex& pi) {
    // A fork child's block is its parent's, with the parent's late objects in it.
    if (pi.p->start_reason() == v1::START_FORK) return;
    const Params params = ParamsOf(*pi.p);
    if (params.major == 0) return;  // the glibc is unknown
    Plan traced, untraced;
    if (!MakePlan(pi, params.naudit > 0, &traced)) return;
    // Without ldscope's audit module, as the program runs untraced: what a fix is for.
    const size_t naudit = params.traced_by_audit ? params.naudit - 1 : params.naudit;
    if (!MakePlan(pi, naudit > 0, &untraced)) return;
    const uint64_t surplus = params.Surplus(params.naudit), plain = params.Surplus(naudit);
    const Outcome got = Simulate(traced, params, surplus), bare = Simulate(untraced, params, plain);
    const bool bare_fails = bare.failed_at != SIZE_MAX;
    if (got.failed_at != SIZE_MAX) {
      // Only a dlopen that did fail: otherwise the layout is not what glibc made.
      if (traced.late[got.failed_at].failed == nullptr) return;
      const Mode mode = params.traced_by_audit && !bare_fails ? Mode::kCausedByTracing : Mode::kFailed;
      Report(pi, params, traced, got, surplus, params.naudit, mode, untraced, naudit);
      return;
    }
    if (params.traced_by_audit && bare_fails)
      Report(pi, params, untraced, bare, plain, naudit, Mode::kHiddenByTracing, untraced, naudit);
  }

  // The least glibc.rtld.optional_static_tls with which every late object fits (with
  // naudit audit modules), in steps of 64 bytes; 0 when none up to 1 MiB does.
  static uint64_t OptionalNeeded(const Plan& plan, Params p, size_t naudit) {
    for (uint64_t opt = RoundUp(p.optional + 1, 64); opt <= (1u << 20); opt += 64) {
      p.optional = opt;
      if (Simulate(plan, p, p.Surplus(naudit)).failed_at == SIZE_MAX) return opt;
    }
    return 0;
  }

  void Report(const ProcessIndex& pi, const Params& params, const Plan& plan, const Outcome& out, uint64_t surplus,
              size_t naudit, Mode mode, const Plan& fix_plan, size_t fix_naudit) {
    const bool hidden_by_tracing = mode == Mode::kHiddenByTracing;
    const Plan::Late& fail = plan.late[out.failed_at];
    const Obj& o = *fail.block.o;
    const std::string base = BaseName(o.path), path = NormalPath(o.path);
    FindingBuilder f(pi, v1::STATIC_TLS_EXHAUSTED,
                     mode == Mode::kFailed ? v1::ERROR
                     : hidden_by_tracing   ? v1::WARNING
                                           : v1::INFO);
    *f.proto().add_objects() = ctx_.Describe(pi, o);
    f.proto().add_evidence(o.open_seq);
    if (fail.failed != nullptr) f.proto().add_evidence(fail.failed->seq());
    Headline(f, mode, base, fail.block.size);
    f.Detail(text::ShowBytes(hidden_by_tracing ? "loaded" : "failed"),
             text::Show("{}, loaded {}", path, ctx_.HowLoaded(pi, o)));
    f.Detail("tls", text::Show("PT_TLS of {} (alignment {}), initial-exec (DF_STATIC_TLS): loaded after "
                               "start-up, it must fit in the static TLS surplus glibc reserved when the "
                               "program started",
                               Bytes(fail.block.size), fail.block.align));
    DetailSurplus(f, params, plan, out, surplus, naudit);
    if (hidden_by_tracing) {
      const Params& p = params;
      f.Detail("tracing", text::Show("ldscope's LD_AUDIT module made the surplus {} (glibc adds room for "
                                     "each audit module): this run was within that extra room of failing, "
                                     "and without ldscope the dlopen of {} fails",
                                     Bytes(p.Surplus(p.naudit)), base));
    }
    if (mode == Mode::kCausedByTracing) {
      f.Detail("tracing",
               "with an LD_AUDIT module glibc lays the static TLS block out before it loads the "
               "program's libraries, so their initial-exec TLS (libc.so.6's too) is taken from "
               "the surplus as a late object's is: without ldscope the start-up objects are "
               "placed first and this one fits; nothing needs doing");
      std::move(f).AddTo(out_);
      return;
    }
    AddFixes(f, params, o, fix_plan, fix_naudit);
    std::move(f).AddTo(out_);
  }

  // The headline: the object that failed to load, or that loaded only because it was
  // traced.
  static void Headline(FindingBuilder& f, Mode mode, const std::string& base, uint64_t size) {
    if (mode == Mode::kHiddenByTracing)
      f.Headline(
          text::Show("{} loaded only because tracing enlarged the static TLS block: without ldscope, "
                     "its {} of initial-exec TLS would not fit (cannot allocate memory in static TLS block)",
                     base, Bytes(size)));
    else if (mode == Mode::kCausedByTracing)
      f.Headline(
          text::Show("{} failed to load only because it was traced: cannot allocate memory in static "
                     "TLS block under ldscope's audit module, while without it its {} of initial-exec "
                     "TLS fit",
                     base, Bytes(size)));
    else
      f.Headline(
          text::Show("{} failed to load: cannot allocate memory in static TLS block (its {} of "
                     "initial-exec TLS do not fit)",
                     base, Bytes(size)));
  }

  // How large the surplus was and why, and what the objects loaded before the failing one
  // left of it.
  static void DetailSurplus(FindingBuilder& f, const Params& params, const Plan& plan, const Outcome& out,
                            uint64_t surplus, size_t naudit) {
    const std::string glibc = fmt::format("glibc {}.{}", params.major, params.minor);
    std::string how =
        params.tunables_supported()
            ? fmt::format("glibc.rtld.nns={}{} and glibc.rtld.optional_static_tls={}{}", params.nns,
                          params.nns_set ? "" : " (default)", params.optional, params.optional_set ? "" : " (default)")
            : std::string("fixed before glibc 2.32");
    if (params.tunables_supported() && naudit > 0)
      how += fmt::format(", {} LD_AUDIT module{}{}", naudit, naudit == 1 ? "" : "s",
                         naudit == params.naudit && params.traced_by_audit ? ", ldscope's among them" : "");
    f.Detail("surplus", text::Show("{} gives {} ({}); with the start-up objects placed, {} of the "
                                   "static TLS block were free for objects loaded later",
                                   glibc, Bytes(surplus), how, Bytes(out.free_after_startup)));
    std::vector<std::string> before;
    for (size_t i = 0; i < out.failed_at; ++i)
      before.push_back(fmt::format("{} ({})", NormalPath(plan.late[i].block.o->path), Bytes(plan.late[i].block.size)));
    f.Detail(
        "used by",
        text::ShowBytes(before.empty() ? fmt::format("no object loaded after start-up before it: the {} free then are "
                                                     "less than its block",
                                                     Bytes(out.free_then))
                                       : fmt::format("{}, loaded after start-up with initial-exec TLS, left {}",
                                                     fmt::join(before, ", "), Bytes(out.free_then))));
  }

  // Load the object at start-up, or enlarge the surplus (where glibc has the tunable).
  static void AddFixes(FindingBuilder& f, const Params& params, const Obj& o, const Plan& fix_plan, size_t fix_naudit) {
    const std::string base = BaseName(o.path), path = NormalPath(o.path);
    // The process's other tunables kept; its own optional_static_tls replaced, not repeated.
    std::string tunables_prefix;
    for (const std::string& t : loader::SplitPath(params.tunables, ":"))
      if (t.rfind("glibc.rtld.optional_static_tls=", 0) != 0) tunables_prefix += t + ":";
    const bool python = o.load != nullptr && o.load->has_python();
    f.Fix(v1::FIX_PRELOAD_BY_PATH,
          text::Show("load {} at start-up, where glibc sizes the static TLS block for it: LD_PRELOAD={}{}", base,
                     text::ShellQuote(path), python ? " (or import the module that loads it before the others)" : ""),
          "LD_PRELOAD", path);
    if (params.tunables_supported()) {
      const uint64_t opt = OptionalNeeded(fix_plan, params, fix_naudit);
      if (opt > 0)
        f.Fix(v1::FIX_SET_TUNABLE,
              text::Show("or enlarge the surplus: GLIBC_TUNABLES={}",
                         text::ShellQuote(fmt::format("{}glibc.rtld.optional_static_tls={}", tunables_prefix, opt))),
              "GLIBC_TUNABLES", fmt::format("{}glibc.rtld.optional_static_tls={}", tunables_prefix, opt));
    }
  }

  Context& ctx_;
  v1::Report* out_;
};

}  // namespace

void FindStaticTls(Context& ctx, v1::Report* out) { Pass(ctx, out).Run(); }

}  // namespace ldscope::analysis
