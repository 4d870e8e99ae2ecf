# libhog.so, loaded RTLD_GLOBAL, carries its own fx_crc32; libplugin.so's own
# libfxcrc.so.1 defines it too, but the global scope comes first.
import ctypes, os, sys
fx = sys.argv[1]
ctypes.CDLL(fx + "/classes/interpose/global/libhog.so", mode=os.RTLD_GLOBAL)
plugin = ctypes.CDLL(fx + "/classes/interpose/plugin/libplugin.so")
print("plugin_init:", plugin.plugin_init())
