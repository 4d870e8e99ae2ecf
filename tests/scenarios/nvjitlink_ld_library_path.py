# LD_LIBRARY_PATH (set by the caller) holds an older libnvJitLink.so.12 that wins over
# the RUNPATH copy next to libcusparse.so.12.
import ctypes, os, sys
fx = sys.argv[1]
try:
    ctypes.CDLL(fx + "/site-packages/nvidia/cusparse/lib/libcusparse.so.12", os.RTLD_NOW)
    print("cusparse: ok")
except OSError as e:
    print("cusparse: OSError:", str(e).replace(fx, "<fixtures>"))
