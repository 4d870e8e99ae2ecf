# An extension module imported while sys.setdlopenflags() has RTLD_GLOBAL brings its own
# fx_crc32 into the global scope; libplugin.so's own libfxcrc.so.1 loses.
import ctypes, os, sys
fx = sys.argv[1]
sys.path.insert(0, fx + "/classes/interpose/pymod")
sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)
import hogmod
sys.setdlopenflags(os.RTLD_NOW)
plugin = ctypes.CDLL(fx + "/classes/interpose/plugin/libplugin.so")
print("plugin_init:", plugin.plugin_init())
