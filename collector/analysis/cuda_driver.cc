// The CUDA driver library, libcuda.so.1 (docs/LOADER.md, "How libcuda is found"): the
// user-space half of the NVIDIA driver, installed with the kernel module and found through
// ld.so.cache. Three things go wrong with it:
// - a CUDA toolkit's link-time stub (…/stubs/libcuda.so) is loaded at run time: every
//   driver call fails (error);
// - two copies are loaded (warning; the duplicates pass leaves libcuda to this one);
// - a cuda-compat copy (…/compat/libcuda.so.1 -> libcuda.so.580.65.06) is used with a
//   kernel driver of another version (warning), or with one the trace does not name
//   (info: the match cannot be checked).
// One system copy, or one copy from any other place that is neither stub nor compat, is
// the healthy case: nothing is reported. The kernel driver's version is the trace's
// (recorded when tracing started), never this machine's.
#include <algorithm>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/env_change.h"
#include "analysis/families.h"
#include "text/escape.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

bool IsDriver(const Obj& o) {
  if (o.path.empty() || o.rolled_back) return false;
  if (o.load != nullptr && (o.load->reason() == v1::LOAD_EXECUTABLE || o.load->reason() == v1::LOAD_VDSO))
    return false;
  return Family(o.soname.empty() ? o.path : o.soname) == "libcuda";
}

// Where a path leads through symlinks, as the file system says now ("" if it cannot).
std::string Resolved(const std::string& path) {
  std::error_code ec;
  const auto p = std::filesystem::canonical(path, ec);
  return ec ? std::string() : p.string();
}

bool Under(const std::string& path, const char* dir) {
  const std::string p = NormalPath(path), r = Resolved(path);
  const std::string d = fmt::format("/{}/", dir);
  return p.find(d) != std::string::npos || r.find(d) != std::string::npos;
}

// The driver version a copy's file name carries (libcuda.so.580.65.06, the file a
// compat directory's libcuda.so.1 links to), or "unknown".
std::string FileVersion(const std::string& path) {
  static const std::regex name("^libcuda\\.so\\.([0-9]+\\.[0-9]+(\\.[0-9]+)*)$");
  for (const std::string& p : {path, Resolved(path)}) {
    std::smatch m;
    const std::string base = BaseName(p);
    if (std::regex_match(base, m, name)) return m[1];
  }
  return "unknown";
}

// -1, 0, 1 comparing dotted numbers.
int CompareVersions(const std::string& a, const std::string& b) {
  auto parts = [](const std::string& s) {
    std::vector<long> v;
    size_t i = 0;
    while (i < s.size()) {
      const size_t dot = s.find('.', i);
      v.push_back(std::strtol(s.substr(i, dot == std::string::npos ? std::string::npos : dot - i).c_str(), nullptr, 10));
      if (dot == std::string::npos) break;
      i = dot + 1;
    }
    return v;
  };
  const auto x = parts(a), y = parts(b);
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    const long p = i < x.size() ? x[i] : 0, q = i < y.size() ? y[i] : 0;
    if (p != q) return p < q ? -1 : 1;
  }
  return 0;
}

// The candidate that found o: the last one its load tried; none for an inherited copy
// or a load that tried no candidate.
const v1::Candidate* FoundBy(const Obj& o) {
  if (o.load == nullptr || o.load->tried_size() == 0) return nullptr;
  return &o.load->tried(o.load->tried_size() - 1);
}

class Pass {
 public:
  Pass(Context& ctx, const ProcessIndex& pi, v1::Report* out) : ctx_(ctx), pi_(pi), out_(out) {
    const auto& t = ctx.timeline();
    kernel_ = t.nvidia_driver_version();
    source_ = t.nvidia_driver_source();
  }

  void Run() {
    std::vector<const Obj*> all;
    for (const auto& [id, o] : pi_.objects)
      if (IsDriver(o)) all.push_back(&o);
    const std::vector<const Obj*> copies = ctx_.DistinctFiles(std::move(all));
    // A forked child's inherited copies are its parent's findings.
    for (const Obj* o : copies)
      if (o->load != nullptr && Under(o->path, "stubs")) Stub(*o);
    const std::vector<const Obj*> together = AliveTogether(copies);
    bool own = false;
    for (const Obj* o : together) own |= o->load != nullptr;
    if (together.size() >= 2 && own) TwoCopies(together);
    for (const Obj* o : copies)
      if (o->load != nullptr && !Under(o->path, "stubs") && Under(o->path, "compat")) Compat(*o);
  }

 private:
  // What the trace says of the kernel driver.
  std::string KernelText() const {
    if (source_.empty()) return "unknown (this trace did not record it)";
    if (source_ == "none")
      return "none loaded when the trace was taken (no /proc/driver/nvidia/version or /sys/module/nvidia/version)";
    if (kernel_.empty()) return fmt::format("unknown ({} did not name a version)", source_);
    return fmt::format("{} (read from {} when the trace was taken)", kernel_, source_);
  }

  std::string Where(const Obj& o) const {
    const std::string p = NormalPath(o.path), r = Resolved(o.path);
    std::string how = ctx_.HowLoaded(pi_, o);
    const v1::Candidate* c = FoundBy(o);
    if (c != nullptr && o.load->reason() != v1::LOAD_NEEDED && c->step() != v1::STEP_AS_GIVEN)
      how += fmt::format("; found via {}", render::CandidateWord(*c));
    return !r.empty() && r != p ? fmt::format("{} -> {} ({})", p, r, how) : fmt::format("{} ({})", p, how);
  }

  FindingBuilder Start(v1::Severity sev, const std::vector<const Obj*>& objs) {
    FindingBuilder f(pi_, v1::CUDA_DRIVER, sev);
    for (const Obj* o : objs) {
      *f.proto().add_objects() = ctx_.Describe(pi_, *o);
      f.proto().add_evidence(o->open_seq);
    }
    return f;
  }

  // How to stop finding `o` the way it was found; keep: the copy to load instead.
  void AvoidFix(FindingBuilder* f, const Obj& o, const std::string& instead, const Obj* keep = nullptr) {
    const std::string dir = DirName(NormalPath(o.path));
    const v1::Candidate* c = FoundBy(o);
    const v1::CandidateStep step = c == nullptr ? v1::STEP_UNKNOWN : c->step();
    if (o.load != nullptr && o.load->reason() == v1::LOAD_PRELOAD) {
      // LD_PRELOAD without the entry that loaded it (as the variable names it).
      std::string text = fmt::format("remove {} from LD_PRELOAD{}", NormalPath(o.path), instead);
      bool dropped = false;
      std::string kept = LdPreloadWithout(pi_, o.load->requested_name(), &dropped);
      if (!dropped) kept = LdPreloadWithout(pi_, NormalPath(o.path), &dropped);
      if (dropped)
        f->Fix(v1::FIX_DROP_FROM_LD_PRELOAD, text::ShowBytes(text), "LD_PRELOAD", kept);
      else
        f->Fix(v1::FIX_DROP_FROM_LD_PRELOAD, text::ShowBytes(text));
    } else if (step == v1::STEP_LD_LIBRARY_PATH) {
      DropFromLdLibraryPathFix(pi_, dir, fmt::format("remove {} from LD_LIBRARY_PATH{}", dir, instead), f);
    } else if (step == v1::STEP_RPATH || step == v1::STEP_RUNPATH) {
      auto req = pi_.objects.find(o.requester);
      f->Fix(v1::FIX_RELINK,
             text::Show("relink {} without {} in its {}{}",
                        req == pi_.objects.end() ? std::string("the requester") : NormalPath(req->second.path), dir,
                        render::StepWord(step), instead));
    } else if (step == v1::STEP_LD_SO_CACHE || step == v1::STEP_DEFAULT_DIRS) {
      f->Fix(v1::FIX_EDIT_LD_SO_CONF, text::Show("remove {} from /etc/ld.so.conf.d/ and run ldconfig{}", dir, instead));
    } else if (keep != nullptr) {
      f->Fix(v1::FIX_LOAD_BY_PATH, text::Show("make the code that loads {} ({}) load {} instead", NormalPath(o.path),
                                              ctx_.HowLoaded(pi_, o), NormalPath(keep->path)));
    } else {
      f->Fix(v1::FIX_LOAD_BY_NAME,
             text::Show("load libcuda.so.1 by name, not by the path {}{}", NormalPath(o.path), instead));
    }
  }

  void Stub(const Obj& o) {
    auto f = Start(v1::ERROR, {&o});
    f.Headline(text::Show("{} is a CUDA toolkit stub: every CUDA driver call fails", BaseName(o.path)));
    f.Detail("loaded", text::ShowBytes(Where(o)));
    f.Detail("why",
             "a toolkit's stubs directory holds a placeholder to link against on machines "
             "without a driver; at run time its functions return CUDA_ERROR_STUB_LIBRARY (34)");
    f.Detail("kernel driver", text::ShowBytes(KernelText()));
    AvoidFix(&f, o, ": the stubs are for linking (-L), never for running");
    if (source_ == "none")
      f.Fix(v1::FIX_INSTALL,
            "install the NVIDIA driver: its libcuda.so.1 comes with the kernel module, "
            "and no kernel driver was loaded when this trace was taken");
    else
      f.Fix(v1::FIX_INSTALL,
            "let the driver's own libcuda.so.1 be found (installed with the kernel "
            "module, listed by ldconfig -p)");
    std::move(f).AddTo(out_);
  }

  void TwoCopies(const std::vector<const Obj*>& copies) {
    auto f = Start(v1::WARNING, copies);
    f.Headline(text::Show("{} copies of the CUDA driver library (libcuda) are loaded together",
                          copies.size() == 2 ? "two" : std::to_string(copies.size())));
    // The copy to keep: the one of the kernel driver's version, else the first.
    const Obj* keep = copies.front();
    for (const Obj* o : copies)
      if (!kernel_.empty() && FileVersion(o->path) == kernel_) keep = o;
    for (const Obj* o : copies) f.Detail("copy", text::Show("{}, version {}", Where(*o), FileVersion(o->path)));
    f.Detail("kernel driver", text::ShowBytes(KernelText()));
    f.Detail("why",
             "each copy keeps its own driver state: contexts, memory and streams made through "
             "one are unknown to the other");
    for (const Obj* o : copies)
      if (o != keep) AvoidFix(&f, *o, fmt::format(", so that {} serves every user", NormalPath(keep->path)), keep);
    std::move(f).AddTo(out_);
  }

  void Compat(const Obj& o) {
    const std::string compat = FileVersion(o.path);
    const v1::Candidate* c = FoundBy(o);
    const std::string found = c == nullptr ? ctx_.HowLoaded(pi_, o) : render::CandidateWord(*c);
    if (compat != "unknown" && !kernel_.empty()) {
      const int cmp = CompareVersions(compat, kernel_);
      if (cmp == 0) return;  // the compat copy matches the kernel driver: what cuda-compat is for
      auto f = Start(v1::WARNING, {&o});
      f.Headline(text::Show("cuda-compat libcuda {} (via {}) with kernel driver {}", compat, found, kernel_));
      f.Detail("loaded", text::ShowBytes(Where(o)));
      f.Detail("kernel driver", text::ShowBytes(KernelText()));
      if (cmp < 0)
        f.Detail("why",
                 "a compat libcuda older than the kernel driver is unsupported: cuInit fails "
                 "with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)");
      else
        f.Detail("why",
                 "forward compatibility works only on data-center GPUs and kernel driver "
                 "branches this compat release supports; elsewhere cuInit fails (803, or 804 "
                 "on unsupported GPUs)");
      AvoidFix(&f, o, fmt::format(", so that the kernel driver's own libcuda.so.1 ({}) is used", kernel_));
      if (cmp > 0)
        f.Fix(v1::FIX_PIN_VERSION, text::Show("or keep it only where forward compatibility is supported "
                                              "(a data-center GPU on a driver branch cuda-compat {} lists)",
                                              compat));
      std::move(f).AddTo(out_);
      return;
    }
    auto f = Start(v1::INFO, {&o});
    f.Headline(
        text::Show("libcuda is a cuda-compat copy ({}, via {}); its match with the kernel driver is "
                   "unknown",
                   compat == "unknown" ? "version unknown" : compat, found));
    f.Detail("loaded", text::ShowBytes(Where(o)));
    f.Detail("compat version", text::ShowBytes(compat == "unknown" ? "unknown (its file name does not say)" : compat));
    f.Detail("kernel driver", text::ShowBytes(KernelText()));
    f.Fix(v1::FIX_CHECK_VERSION, text::Show("compare with the kernel driver (cat /proc/driver/nvidia/version): "
                                            "a compat libcuda must not be older; if it is, remove {} from "
                                            "the search path",
                                            DirName(NormalPath(o.path))));
    std::move(f).AddTo(out_);
  }

  Context& ctx_;
  const ProcessIndex& pi_;
  v1::Report* out_;
  std::string kernel_, source_;
};

}  // namespace

void FindCudaDriver(Context& ctx, v1::Report* out) {
  for (const auto& pi : ctx.processes()) Pass(ctx, pi, out).Run();
}

}  // namespace ldscope::analysis
