# A fake torch: its extension-like library needs ncclCommRegister from the NCCL its
# RPATH points at, loaded with RTLD_NOW as Python loads extension modules.
import ctypes, os
try:
    ctypes.CDLL(os.environ["LDSCOPE_FX"] + "/site-packages/torch/lib/libtorch_cuda.so", os.RTLD_NOW)
except OSError as e:
    raise ImportError(str(e)) from None
