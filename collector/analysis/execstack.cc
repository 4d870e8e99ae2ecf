// An executable stack refused (docs/LOADER.md, "Executable stacks"): since glibc 2.41 a
// dlopen no longer makes the process's stack executable for an object whose PT_GNU_STACK
// asks for it (PF_X, or no PT_GNU_STACK at all on x86-64 and aarch64); it fails instead
// with "cannot enable executable stack as shared object requires: Invalid argument",
// before the object's la_objopen. The trace shows a search that ended at a loadable file
// and mapped nothing; the file's stack flags tell why (EXECSTACK_REFUSED).
#include <elf.h>

#include <charconv>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/families.h"
#include "text/escape.h"
#include "render/python_text.h"

namespace ldscope::analysis {
namespace {

bool RefusesExecStack(const std::string& glibc) {
  int major = 0, minor = 0;
  auto [p, ec] = std::from_chars(glibc.data(), glibc.data() + glibc.size(), major);
  if (ec != std::errc() || p == glibc.data() + glibc.size() || *p != '.') return false;
  std::from_chars(p + 1, glibc.data() + glibc.size(), minor);
  return major > 2 || (major == 2 && minor >= 41);
}

// Whether the object asks for an executable stack, as ld.so reads it.
bool WantsExecStack(const elf::ElfInfo& e) { return !e.gnu_stack || (e.stack_flags & PF_X) != 0; }

std::string StackWords(const elf::ElfInfo& e) {
  if (!e.gnu_stack) return "no PT_GNU_STACK header, which glibc takes as a request for an executable stack";
  std::string rwx;
  rwx += (e.stack_flags & PF_R) ? "R" : "";
  rwx += (e.stack_flags & PF_W) ? "W" : "";
  rwx += (e.stack_flags & PF_X) ? "E" : "";
  return fmt::format("PT_GNU_STACK flags {} (PF_X: an executable stack)", rwx);
}

class Pass {
 public:
  Pass(Context& ctx, v1::Report* out) : ctx_(ctx), out_(out) {}

  void Run() {
    for (const auto& pi : ctx_.processes()) {
      if (!RefusesExecStack(pi.p->glibc_version())) continue;
      // A stack made executable at start-up (by the executable or a start-up library)
      // stays so: a later object's request is then met.
      if (StartupStackExecutable(pi)) continue;
      for (size_t i = 0; i < pi.entries.size(); ++i)
        if (pi.entries[i]->has_search()) Search(pi, *pi.entries[i], i < pi.before_first_dlopen);
    }
  }

 private:
  bool StartupStackExecutable(const ProcessIndex& pi) {
    uint64_t first_dlopen = UINT64_MAX;
    for (const auto& [id, x] : pi.objects)
      if (x.load != nullptr && x.load->reason() == v1::LOAD_DLOPEN) first_dlopen = std::min(first_dlopen, x.open_seq);
    for (const auto& [id, o] : pi.objects) {
      if (o.load == nullptr || o.lmid != 0 || o.open_seq > first_dlopen) continue;
      const v1::LoadReason r = o.load->reason();
      if (r != v1::LOAD_EXECUTABLE && r != v1::LOAD_PRELOAD && r != v1::LOAD_NEEDED) continue;
      const elf::ElfInfo* e = ctx_.File(o.path);
      if (e != nullptr && WantsExecStack(*e)) return true;
    }
    return false;
  }

  void Search(const ProcessIndex& pi, const v1::Entry& entry, bool before_dlopen) {
    const v1::SearchResult& s = entry.search();
    if (s.has_same_as() || s.tried_size() == 0 || s.outcome().rfind("unknown", 0) == 0) return;
    auto it = pi.objects.find(s.requester().id());
    if (it == pi.objects.end()) return;
    const Obj& r = it->second;
    // The search ended at its last candidate, a loadable library, and mapped nothing.
    const auto& last = s.tried(s.tried_size() - 1);
    std::string file = last.path();
    if (!file.empty() && file[0] != '/' && !pi.p->cwd().empty()) file = pi.p->cwd() + "/" + file;
    const elf::Ident& id = loader::IdentOf(file, pi.env);
    if (loader::Judge(id, pi.env.machine) != loader::Verdict::kUse) return;
    const elf::ElfInfo* e = ctx_.files().Get(file);
    if (e == nullptr || !WantsExecStack(*e)) return;
    const bool needed = r.load != nullptr && std::find(r.load->needed().begin(), r.load->needed().end(),
                                                       s.requested_name()) != r.load->needed().end();
    if (needed && before_dlopen) return;  // start-up: glibc makes the stack executable
    const std::string path = NormalPath(file), base = BaseName(path);
    FindingBuilder f(pi, v1::EXECSTACK_REFUSED, v1::ERROR);
    *f.proto().add_objects() = ctx_.Describe(pi, r);
    f.proto().add_evidence(entry.seq());
    f.Headline(
        text::Show("{} failed to load: it asks for an executable stack, which glibc {} refuses to "
                   "enable after start-up",
                   base, pi.p->glibc_version()));
    const std::string py = render::PyCauseText(s.python(), pi.p->cwd());
    f.Detail("requested by", text::Show("{} {} {} {} (loaded {}){}", needed ? "NEEDED" : "dlopen of",
                                        s.requested_name(), needed ? "of" : "from", NormalPath(r.path),
                                        ctx_.HowLoaded(pi, r), py.empty() ? "" : ", for " + py));
    f.Detail("object", text::Show("{}: {}", path, StackWords(*e)));
    f.Detail("glibc", text::Show("{}: since 2.41 a dlopen no longer makes the stack executable for an "
                                 "object that asks for it, and fails instead; the program's stack was "
                                 "not executable at start-up",
                                 pi.p->glibc_version()));
    f.Detail("loader says", "cannot enable executable stack as shared object requires: Invalid argument");
    f.Fix(v1::FIX_REBUILD_NOEXECSTACK,
          text::Show("rebuild {} with -Wl,-z,noexecstack (and assembly files with .note.GNU-stack): it almost "
                     "never needs an executable stack",
                     base));
    f.Fix(v1::FIX_CLEAR_EXECSTACK, text::Show("or, as a stop-gap, clear the flag in the file (patchelf 0.18 or later): "
                                              "patchelf --clear-execstack {}",
                                              text::ShellQuote(path)));
    std::move(f).AddTo(out_);
  }

  Context& ctx_;
  v1::Report* out_;
};

}  // namespace

void FindExecStack(Context& ctx, v1::Report* out) { Pass(ctx, out).Run(); }

}  // namespace ldscope::analysis
