// Fidelity against glibc itself: in the very same run, the objects ldscope records as
// loaded (requested name, namespace, base address, in order) must be exactly the link
// maps that LD_DEBUG=files reports glibc generating, process by process; and so must
// the unloads of dlclose and of failed dlopens ("destroying link map").
#include <gtest/gtest.h>

#include "support/ld_debug.h"

namespace ldscope {
namespace {

using testing::ExpectSameAsGlibc;

TEST(Fidelity, CDriverDlopenDlmopenDlcloseFailure) {
  ExpectSameAsGlibc("fidelity_driver",
                    {DLPROBE, "open", FIXTURES "/lib/libfix_a.so", "open",
                     FIXTURES "/lib/libfix_bad.so", "mopen", FIXTURES "/lib/libfix_b.so", "lazy",
                     "libm.so.6", "close", "close", "fork", "open",
                     FIXTURES "/lib/threads/libfix_t1.so"},
                    6);
}

// The machine's real python3 importing extension modules, numpy among them.
TEST(Fidelity, RealPythonImports) {
  ExpectSameAsGlibc("fidelity_python",
                    {"/usr/bin/python3", "-c",
                     "import numpy, decimal, json, ssl, sqlite3, ctypes, hashlib, zlib, bz2, "
                     "lzma, socket, select, array, math, uuid, csv, xml.etree.ElementTree, "
                     "ctypes.util; ctypes.CDLL('libm.so.6')"},
                    20);
}

}  // namespace
}  // namespace ldscope
