// What a golden file must not encode: the machine the suite runs on (its CPU's hwcaps
// subdirectories, its Python's minor version, its shell, its multiarch library
// directories), where the build tree is, and what changes from run to run (pids,
// times, build-ids). ExpectGolden applies this to every text it compares, so no test
// can forget it.
#pragma once

#include <string>

namespace ldscope::testing {

// The text with each of those replaced by a ${NAME} placeholder:
// - `show` candidates in hwcaps subdirectories (NormaliseHwcaps in hwcaps.h);
// - the build tree's paths: ${FIXTURES}, ${DLPROBE}, ${SCENARIOS}, ${PYFIXTURES},
//   ${AUDIT_LIB}, ${PYTHON_HOOK}, a test's scratch directory ${SCRATCH};
// - python3.N as python3.X (and cpython-3N as cpython-3X), "Python 3.N.M" as
//   "Python 3.X.Y" and "(tag cp3N)" as "(tag cp3X)"; /usr/bin/dash, bash, sh
//   as ${SHELL}; (/usr)/bin/true as ${BIN}/true; /lib/<multiarch triplet> as
//   /lib/${MULTIARCH};
// - pids, thread ids, times, sequence numbers, build-ids and evidence lists as the
//   report, JSON, step summary and Chrome export write them; the JSON report's
//   ldscope version as ${VERSION}, and a load's import index (the count of imports
//   before it varies with the interpreter's caches) as 1.
// Idempotent: a canonical text is its own canonical form.
std::string Canonicalise(const std::string& text);

}  // namespace ldscope::testing
