// See families.h.
#include "analysis/families.h"

#include <algorithm>
#include <regex>

#include "elf/elf_file.h"
#include "render/words.h"

namespace ldscope::analysis {
namespace {

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

bool DefinesName(const elf::ElfInfo* e, const std::string& name) {
  if (e == nullptr) return false;
  return e->Find(elf::SymbolQuery(name, "")).named;
}

// A defined symbol whose name contains `part` (OpenBLAS builds rename their exports
// with prefixes and suffixes: scipy_openblas_get_config64_).
bool DefinesLike(const elf::ElfInfo* e, const std::string& part) {
  if (e == nullptr) return false;
  bool found = false;
  e->ForEachSymbol(elf::ElfInfo::Which::kDefined, [&](const elf::Symbol& s) {
    found = found || s.name.find(part) != std::string::npos;
  });
  return found;
}

struct CudaName {
  const char* prefix;
  const char* component;
};
// The longest matching prefix wins: libcublasLt is cuBLAS, libcusparseLt cuSPARSELt.
const CudaName kCuda[] = {
    {"libcublas", "cuBLAS"},     {"libcudnn", "cuDNN"},       {"libcufft", "cuFFT"},
    {"libcusparse", "cuSPARSE"}, {"libcusolver", "cuSOLVER"}, {"libcurand", "cuRAND"},
    {"libcudart", "CUDA runtime"}, {"libnvrtc", "NVRTC"},     {"libnvJitLink", "nvJitLink"},
    {"libnccl", "NCCL"},         {"libcupti", "CUPTI"},       {"libnvToolsExt", "NVTX"},
    {"libcufile", "cuFile"},     {"libnvjpeg", "nvJPEG"},     {"libnpp", "NPP"},
    {"libcusparseLt", "cuSPARSELt"},
};

}  // namespace

bool IsMarkerSymbol(std::string_view name) {
  static const std::string_view kNames[] = {"MKL_Get_Version_String", "bli_info_get_version_str",
                                            "omp_get_num_threads", "omp_set_num_threads",
                                            "__kmpc_fork_call", "GOMP_parallel", "dgemm_"};
  for (std::string_view n : kNames)
    if (name == n) return true;
  // DefinesLike's parts.
  return name.find("openblas_get_config") != std::string_view::npos ||
         name.find("flexiblas_") != std::string_view::npos;
}

std::string DirName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

RuntimeId Classify(const std::string& soname_or_path, const elf::ElfInfo* e) {
  const std::string f = Family(soname_or_path);
  RuntimeId id;
  auto set = [&](Runtime r, const char* impl) {
    id.runtime = r;
    id.implementation = impl;
  };
  if (StartsWith(f, "libgomp")) set(Runtime::kOpenMP, "GNU libgomp");
  else if (StartsWith(f, "libiomp")) set(Runtime::kOpenMP, "Intel libiomp5");
  else if (f == "libomp" || f == "libomp5") set(Runtime::kOpenMP, "LLVM libomp");
  else if (StartsWith(f, "libopenblas") || StartsWith(f, "libscipy_openblas")) set(Runtime::kBlas, "OpenBLAS");
  else if (StartsWith(f, "libmkl_")) set(Runtime::kBlas, "MKL");
  else if (StartsWith(f, "libblis")) set(Runtime::kBlas, "BLIS");
  else if (StartsWith(f, "libflexiblas")) set(Runtime::kBlas, "FlexiBLAS");
  else if (f == "libstdc++") set(Runtime::kCxx, "libstdc++");
  if (id.runtime == Runtime::kNone) {
    size_t best = 0;
    for (const auto& c : kCuda)
      if (StartsWith(f, c.prefix) && std::string(c.prefix).size() > best) {
        best = std::string(c.prefix).size();
        set(Runtime::kCuda, c.component);
      }
  }
  // Marker symbols, for generic names that say nothing of the implementation
  // (libblas.so.3 as OpenBLAS, liblapack, an OpenMP runtime under a name of its own), as
  // threadpoolctl finds them. A runtime linked statically into a bigger library
  // (torch's libtorch_cpu exports MKL's entry points) is that library's own business.
  const bool generic = StartsWith(f, "libblas") || StartsWith(f, "libcblas") || StartsWith(f, "liblapack") ||
                       f.find("omp") != std::string::npos;
  if (id.runtime == Runtime::kNone && e != nullptr && generic) {
    if (DefinesLike(e, "openblas_get_config")) set(Runtime::kBlas, "OpenBLAS");
    else if (DefinesName(e, "MKL_Get_Version_String")) set(Runtime::kBlas, "MKL");
    else if (DefinesName(e, "bli_info_get_version_str")) set(Runtime::kBlas, "BLIS");
    else if (DefinesLike(e, "flexiblas_")) set(Runtime::kBlas, "FlexiBLAS");
    else if (DefinesName(e, "omp_get_num_threads") && DefinesName(e, "omp_set_num_threads")) {
      if (DefinesName(e, "__kmpc_fork_call")) set(Runtime::kOpenMP, "LLVM or Intel OpenMP");
      else if (DefinesName(e, "GOMP_parallel")) set(Runtime::kOpenMP, "GNU libgomp");
    } else if (DefinesName(e, "dgemm_") && StartsWith(f, "libblas")) {
      set(Runtime::kBlas, "reference BLAS");
    }
  }
  if (id.runtime == Runtime::kBlas) id.blas_names = e != nullptr && DefinesName(e, "dgemm_");
  return id;
}

std::string RuntimeVersion(Context& ctx, const Obj& o, const RuntimeId& id) {
  if (id.implementation == "OpenBLAS") {
    // threadpoolctl parses openblas_get_config()'s "OpenBLAS 0.3.21 DYNAMIC_ARCH ...";
    // the literal sits in .rodata beside messages that also start with "OpenBLAS ".
    static const std::regex config("^OpenBLAS ([0-9]+\\.[0-9]+[0-9A-Za-z.+_-]*)( |$)");
    for (const auto& s : ctx.files().FindStrings(o.path, "OpenBLAS ")) {
      std::smatch m;
      if (std::regex_search(s, m, config)) return m[1];
    }
    return "unknown";
  }
  if (id.implementation == "MKL") {
    for (const auto& s : ctx.files().FindStrings(o.path, "Math Kernel Library Version ")) {
      std::string v = s.substr(std::string("Math Kernel Library Version ").size());
      v = v.substr(0, v.find_first_of("- "));
      if (!v.empty()) return v;
    }
    return "unknown";
  }
  if (id.runtime == Runtime::kCxx || id.runtime == Runtime::kCuda) {
    const std::string v = ctx.VersionOf(o.path, o.soname);
    return v.empty() ? "unknown" : v;
  }
  return "unknown";
}

bool IsSystemRuntime(const std::string& soname_or_path) {
  static const char* const kSystem[] = {
      "libc", "libm", "libpthread", "libdl", "librt", "libutil", "libresolv", "libnsl",
      "libanl", "libcrypt", "libmvec", "ld-linux-x86-64", "ld-linux", "libstdc++", "libgcc_s",
      "libatomic", "libgfortran", "libquadmath", "libz", "libBrokenLocale", "libthread_db"};
  const std::string f = Family(soname_or_path);
  for (const char* s : kSystem)
    if (f == s) return true;
  return false;
}

bool InSystemDir(const std::string& path) {
  static const char* const kDirs[] = {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/",
                                      "/usr/local/lib/", "/lib32/", "/usr/lib32/"};
  const std::string p = NormalPath(path);
  for (const char* d : kDirs)
    if (StartsWith(p, d) && p.find("/python", std::string(d).size()) == std::string::npos &&
        p.find("-packages/") == std::string::npos)
      return true;
  return false;
}

std::vector<FallThrough> FallThroughs(Context& ctx, const ProcessIndex& pi) {
  std::vector<FallThrough> out;
  for (const auto& [id, o] : pi.objects) {
    if (o.load == nullptr || o.load->reason() != v1::LOAD_NEEDED || o.load->tried_size() == 0) continue;
    const v1::CandidateStep step = render::FoundBy(*o.load);
    if (step != v1::STEP_LD_LIBRARY_PATH && step != v1::STEP_LD_SO_CACHE && step != v1::STEP_DEFAULT_DIRS)
      continue;
    auto req = pi.objects.find(o.requester);
    if (req == pi.objects.end()) continue;
    loader::Object r = pi.AsRequester(req->second, ctx.files());
    if (r.rpath.empty() && r.runpath.empty()) continue;
    // The requester's own directories alone: did any of them hold the name?
    loader::Environment own = pi.env;
    own.ld_library_path.clear();
    own.cache = nullptr;  // nodeflib alone keeps ld.so.cache entries outside the default dirs
    r.nodeflib = true;
    const std::string& name = o.load->requested_name();
    const loader::Result res = loader::Search(name, r, r.runpath.empty() ? pi.LoaderChain(req->second, ctx.files())
                                                                         : std::vector<loader::Object>{},
                                              own);
    if (!res.path.empty()) continue;  // LD_LIBRARY_PATH before RUNPATH: another pass's story
    FallThrough f;
    f.object = &o;
    f.requester = &req->second;
    f.step = step;
    // The directories the loader really tried for its RPATH/RUNPATH steps, from the
    // trace (the model's own walk agrees on the answer, not always on the list).
    std::vector<std::string> tried;
    for (const auto& c : o.load->tried())
      if (c.step() == v1::STEP_RPATH || c.step() == v1::STEP_RUNPATH) tried.push_back(c.path());
    if (tried.empty()) tried = res.tried;
    for (const auto& c : tried) {
      if (c.size() <= name.size() || c.compare(c.size() - name.size() - 1, std::string::npos, "/" + name) != 0)
        continue;
      std::string dir = NormalPath(DirName(c));
      bool sub = false;
      for (const auto& s : pi.env.subdirs) sub |= dir.size() > s.size() && dir.compare(dir.size() - s.size(), s.size(), s) == 0;
      if (!sub && std::find(f.own_dirs.begin(), f.own_dirs.end(), dir) == f.own_dirs.end())
        f.own_dirs.push_back(dir);
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace ldscope::analysis
