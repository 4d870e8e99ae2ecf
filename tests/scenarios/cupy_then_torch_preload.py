# What real torch does: cupy's preload loads the system NCCL 2.16 first; torch's own
# preload then dlopens the wheel's NCCL by path (a second copy, RTLD_LOCAL), and the
# extension's DT_NEEDED libnccl.so.2 still binds to the first one by SONAME.
import ctypes, os, sys
fx = sys.argv[1]
ctypes.CDLL(fx + "/system/lib/libnccl.so.2.16.2")
ctypes.CDLL(fx + "/site-packages/nvidia/nccl/lib/libnccl.so.2")
try:
    ctypes.CDLL(fx + "/site-packages/torch/lib/libtorch_cuda.so", os.RTLD_NOW)
    print("torch: ok")
except OSError as e:
    print("torch: ImportError:", str(e).replace(fx, "<fixtures>"))
