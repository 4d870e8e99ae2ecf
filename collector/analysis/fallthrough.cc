// Fall-through to another installation: a NEEDED of an object that carries its own
// RPATH/RUNPATH, which none of those directories held, found by LD_LIBRARY_PATH,
// ld.so.cache or the default directories. Alone that is how Debian's own packages find
// system libraries; it is a finding only when a failure followed (error) or when it
// splits one library family across two installations (warning).
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "text/shown.h"
#include "analysis/analysis.h"
#include "analysis/env_change.h"
#include "analysis/families.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

std::string Join(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

// What the requester needs from the fall-through copy that it does not offer: version
// nodes of its verneed for that file, and symbols bound to that file's versions.
std::vector<std::string> Lacking(Context& ctx, const Obj& requester, const Obj& o, const std::string& name) {
  std::vector<std::string> out;
  const elf::ElfInfo* r = ctx.File(requester.path);
  const elf::ElfInfo* got = ctx.File(o.path);
  if (r == nullptr || got == nullptr) return out;
  for (const auto& vn : r->verneeds)
    if (vn.file == name)
      for (const auto& v : vn.versions)
        if (!got->DefinesVersion(v)) out.push_back(fmt::format("version {}", v));
  for (const auto& s : r->Symbols(elf::ElfInfo::Which::kUndefined))
    if (!s.defined && !s.weak && s.version_file == name && !got->Defines(s.name, s.version) &&
        out.size() < 8)
      out.push_back(fmt::format("{}@{}", s.name, s.version));
  return out;
}

// One library family: same CUDA component or runtime, or one name the stem of the other
// (libcublas and libcublasLt; libtorch and libtorch_cpu), or the same family.
bool SameFamily(const Obj& a, const Obj& b, Context& ctx) {
  const std::string fa = Family(a.soname.empty() ? a.path : a.soname);
  const std::string fb = Family(b.soname.empty() ? b.path : b.soname);
  const std::string& shorter = fa.size() < fb.size() ? fa : fb;
  const std::string& longer = fa.size() < fb.size() ? fb : fa;
  // The stem must end where a new word starts (libcublas|Lt, libtorch|_cpu), so that
  // libcuda (the driver) is not taken for a relative of libcudart.
  if (fa == fb) return true;
  if (shorter.size() >= 7 && longer.size() > shorter.size() && longer.rfind(shorter, 0) == 0) {
    const char next = longer[shorter.size()];
    if (next == '_' || next == '-' || (next >= 'A' && next <= 'Z')) return true;
  }
  const RuntimeId ra = Classify(fa, ctx.File(a.path));
  const RuntimeId rb = Classify(fb, ctx.File(b.path));
  return ra.runtime != Runtime::kNone && ra.runtime == rb.runtime && ra.implementation == rb.implementation;
}

std::string OwnDirsText(const FallThrough& ft, Context& ctx, const ProcessIndex& pi) {
  const loader::Object r = pi.AsRequester(*ft.requester, ctx.files());
  return fmt::format("{} ({}): {}", r.runpath.empty() ? "RPATH" : "RUNPATH",
                     r.runpath.empty() ? r.rpath : r.runpath,
                     ft.own_dirs.empty() ? std::string("no directory") : Join(ft.own_dirs));
}

void Failure(Context& ctx, const ProcessIndex& pi, const FallThrough& ft,
             const std::vector<std::string>& lacking, v1::Report* out) {
  const Obj& o = *ft.object;
  const Obj& r = *ft.requester;
  const std::string name = o.load->requested_name();
  FindingBuilder f(pi, v1::FALL_THROUGH, v1::ERROR);
  *f.proto().add_objects() = ctx.Describe(pi, r);
  *f.proto().add_objects() = ctx.Describe(pi, o);
  f.proto().add_evidence(r.open_seq);
  f.proto().add_evidence(o.open_seq);
  f.Headline(text::Show("{} failed: its {} fell through to {} and lacks {}", BaseName(r.path), name,
                        render::StepWord(ft.step), lacking.front()));
  f.Detail("needed by", text::Show("{} ({})", NormalPath(r.path), ctx.HowLoaded(pi, r)));
  f.Detail("own directories", text::ShowBytes(OwnDirsText(ft, ctx, pi) + fmt::format(" (none holds {})", name)));
  f.Detail("bound to", text::Show("{} (found via {})", NormalPath(o.path), render::StepWord(ft.step)));
  f.Detail("lacks", text::ShowBytes(Join(lacking)));
  const std::string dest = ft.own_dirs.empty() ? std::string("the requester's directory") : ft.own_dirs.front();
  f.Fix(v1::FIX_INSTALL,
        text::Show("install the {} that {} was built with into {}, where its {} looks first", name, BaseName(r.path),
                   dest, pi.AsRequester(r, ctx.files()).runpath.empty() ? "RPATH" : "RUNPATH"));
  const std::string odir = DirName(NormalPath(o.path));
  if (ft.step == v1::STEP_LD_LIBRARY_PATH)
    DropFromLdLibraryPathFix(
        pi, odir, fmt::format("or remove {} from LD_LIBRARY_PATH if another copy should serve it", odir), &f);
  else
    f.Fix(v1::FIX_INSTALL, text::Show("or upgrade the system's {} ({}) to one that offers {}", name, NormalPath(o.path),
                                      lacking.front()));
  std::move(f).AddTo(out);
}

void Split(Context& ctx, const ProcessIndex& pi, const FallThrough& ft, const Obj& sibling, v1::Report* out) {
  const Obj& o = *ft.object;
  const Obj& r = *ft.requester;
  const std::string name = o.load->requested_name();
  const std::string odir = DirName(NormalPath(o.path));
  FindingBuilder f(pi, v1::FALL_THROUGH, v1::WARNING);
  *f.proto().add_objects() = ctx.Describe(pi, o);
  *f.proto().add_objects() = ctx.Describe(pi, sibling);
  *f.proto().add_objects() = ctx.Describe(pi, r);
  f.proto().add_evidence(o.open_seq);
  f.proto().add_evidence(sibling.open_seq);
  f.Headline(text::Show("{} fell through to {}: its family is split across two installations", name,
                        render::StepWord(ft.step)));
  f.Detail("needed by", text::Show("{} ({})", NormalPath(r.path), ctx.HowLoaded(pi, r)));
  f.Detail("own directories", text::ShowBytes(OwnDirsText(ft, ctx, pi) + fmt::format(" (none holds {})", name)));
  f.Detail("bound to", text::Show("{} (found via {})", NormalPath(o.path), render::StepWord(ft.step)));
  f.Detail(
      "same family",
      text::ShowBytes(&sibling == &r ? fmt::format("{} (the requester itself)", NormalPath(sibling.path))
                                     : fmt::format("{} ({})", NormalPath(sibling.path), ctx.HowLoaded(pi, sibling))));
  if (!sibling.soname.empty() && access((odir + "/" + sibling.soname).c_str(), F_OK) == 0)
    f.Detail("other installation", text::Show("{} holds its own {} too", odir, sibling.soname));
  // Where the family's other member lives among the requester's directories (the
  // wheel's nvidia/cu13/lib, not the first RPATH entry).
  const std::string sdir = DirName(NormalPath(sibling.path));
  const std::string dest = ft.own_dirs.empty() || std::find(ft.own_dirs.begin(), ft.own_dirs.end(), sdir) != ft.own_dirs.end()
                               ? sdir
                               : ft.own_dirs.front();
  f.Fix(v1::FIX_INSTALL, text::Show("restore {} in {} (reinstall the package that put {} there, at the "
                                    "same version)",
                                    name, dest, BaseName(sibling.path)));
  if (ft.step == v1::STEP_LD_LIBRARY_PATH)
    DropFromLdLibraryPathFix(pi, odir, fmt::format("or remove {} from LD_LIBRARY_PATH", odir), &f);
  else
    f.Fix(v1::FIX_PRELOAD_BY_PATH,
          text::Show("or load {} and {} from one installation (both from {})", BaseName(sibling.path), name, odir));
  std::move(f).AddTo(out);
}

}  // namespace

void FindFallThrough(Context& ctx, v1::Report* out) {
  for (const auto& pi : ctx.processes()) {
    for (const FallThrough& ft : FallThroughs(ctx, pi)) {
      const Obj& o = *ft.object;
      const std::string name = o.load->requested_name();
      if (IsSystemRuntime(name) && InSystemDir(o.path)) continue;
      if (ft.requester->rolled_back) {
        const auto lacking = Lacking(ctx, *ft.requester, o, name);
        if (!lacking.empty()) {
          Failure(ctx, pi, ft, lacking, out);
          continue;
        }
      }
      // A relative from the requester's own directories (or the requester itself),
      // loaded before or after it while it was loaded (NEEDED order decides which first).
      const Obj* sibling = nullptr;
      std::vector<const Obj*> candidates = {ft.requester};
      for (const auto& [id, a] : pi.objects)
        if (a.lmid == o.lmid && Overlap(a, o) &&
            std::find(ft.own_dirs.begin(), ft.own_dirs.end(), DirName(NormalPath(a.path))) != ft.own_dirs.end())
          candidates.push_back(&a);
      for (const Obj* c : candidates)
        if (sibling == nullptr && c != &o && !ctx.SameFile(c->path, o.path) &&
            DirName(NormalPath(c->path)) != DirName(NormalPath(o.path)) && SameFamily(*c, o, ctx))
          sibling = c;
      if (sibling != nullptr) Split(ctx, pi, ft, *sibling, out);
    }
  }
}

}  // namespace ldscope::analysis
