# torch's libgomp.so.1 global first (libtorch_global_deps is loaded RTLD_GLOBAL), then an
# extension whose own copy is a wheel's renamed libgomp: its omp_* calls bind to the
# global copy. Both are GNU libgomp: information, not a warning.
import ctypes, os, sys
fx = sys.argv[1]
ctypes.CDLL(fx + "/classes/omp/lib/libgomp.so.1", mode=os.RTLD_GLOBAL)
user = ctypes.CDLL(fx + "/classes/omp/app/libompuser.so")
print("omp_user:", user.omp_user())
