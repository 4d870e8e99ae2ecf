# "import cupy; import torch": cupy's preload loads the system NCCL 2.16 first, then the
# torch extension needs ncclCommRegister from the NCCL its RPATH points at.
import ctypes, os, sys
fx = sys.argv[1]
ctypes.CDLL(fx + "/system/lib/libnccl.so.2.16.2")
try:
    ctypes.CDLL(fx + "/site-packages/torch/lib/libtorch_cuda.so", os.RTLD_NOW)
    print("torch: ok")
except OSError as e:
    print("torch: ImportError:", str(e).replace(fx, "<fixtures>"))
