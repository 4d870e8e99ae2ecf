# ctypes.CDLL loads libprovider.so RTLD_LOCAL (its default mode); libconsumer.so uses
# provider_fn without a DT_NEEDED on it, so its dlopen fails: the symbol is loaded, but
# outside its lookup scope.
import ctypes, sys
fx = sys.argv[1]
ctypes.CDLL(fx + "/classes/scope/provider/libprovider.so")
try:
    ctypes.CDLL(fx + "/classes/scope/consumer/libconsumer.so")
    print("libconsumer.so: loaded")
except OSError as e:
    print("libconsumer.so: OSError:", str(e).replace(fx, "${FIXTURES}"))
