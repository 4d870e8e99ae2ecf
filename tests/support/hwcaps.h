// Which subdirectories glibc tries under each searched directory depends on the CPU
// (glibc-hwcaps x86-64-v2/v3/v4, and before glibc 2.37 the legacy tls/x86_64,
// haswell/avx512_1, ... ones) and on the glibc version: goldens must not encode them.
#pragma once

#include <string>

namespace ldscope::testing {

// Whether sub (relative, e.g. "glibc-hwcaps/x86-64-v3", "tls/haswell/avx512_1") is one of
// the subdirectories glibc tries under a search directory for some CPU.
bool IsHwcapsSubdir(const std::string& sub);

// `ldscope show` text with the CPU-dependent candidates normalised: the candidates in
// hwcaps subdirectories of a searched directory are dropped and the directory's own
// candidate is preceded by one "tried STEP DIR/${HWCAPS}/FILE" line (also where this
// CPU has none); "events N" becomes "events M + ${HWCAPS}", M not counting the dropped
// candidates (each was one search event), in a process that searched a directory.
// Candidates of "as given" and ld.so.cache steps are not directory searches and stay
// as they are. Idempotent: normalised text is left as it is.
std::string NormaliseHwcaps(const std::string& show_text);

}  // namespace ldscope::testing
