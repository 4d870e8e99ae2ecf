# "import torch; import cupy": no error, but two NCCLs live in one process.
import ctypes, os, sys
fx = sys.argv[1]
ctypes.CDLL(fx + "/site-packages/torch/lib/libtorch_cuda.so", os.RTLD_NOW)
print("torch: ok")
ctypes.CDLL(fx + "/system/lib/libnccl.so.2.16.2")
print("cupy: ok")
