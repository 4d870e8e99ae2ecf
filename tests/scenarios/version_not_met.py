# libveruser.so needs libver.so.1's VER_2; LD_LIBRARY_PATH (set by the caller) finds an
# old libver.so.1 that only has VER_1.
import ctypes, os, sys
fx = sys.argv[1]
try:
    ctypes.CDLL(fx + "/ver/app/libveruser.so", os.RTLD_NOW)
    print("veruser: ok")
except OSError as e:
    print("veruser: OSError:", str(e).replace(fx, "<fixtures>"))
