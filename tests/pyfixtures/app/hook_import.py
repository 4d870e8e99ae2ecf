# A program for `ldscope hook` (tests/e2e/snapshot_test.cc), FIXTURES the first argument.
# "loader": loads two NCCLs (torch's through libtorch_cuda.so, then the system's 2.16.2),
# then imports flash_attn_2_cuda, an extension built against another torch: the import
# fails with an undefined symbol and ends the program. "healthy": the same loads, no
# failure. "other": an ImportError that is not the loader's ends it.
import ctypes
import os
import sys

fx, what = sys.argv[1], sys.argv[2]
ctypes.CDLL(fx + "/site-packages/torch/lib/libtorch_cuda.so", os.RTLD_LAZY)
ctypes.CDLL(fx + "/system/lib/libnccl.so.2.16.2")
if what == "loader":
    sys.path.insert(0, fx + "/classes/skew/site-packages")
    import flash_attn_2_cuda  # noqa: F401
elif what == "other":
    import no_such_module_anywhere  # noqa: F401
print("done")
