# Loads libraries with ctypes as the arguments say ("open PATH": RTLD_NOW, "lazy PATH":
# RTLD_LAZY, "global PATH": RTLD_NOW | RTLD_GLOBAL), prints "ready", then waits until
# its standard input ends: a Python process for `ldscope snapshot` to read while it runs.
import ctypes, os, sys
args = sys.argv[1:]
modes = {"open": os.RTLD_NOW, "lazy": os.RTLD_LAZY, "global": os.RTLD_NOW | os.RTLD_GLOBAL}
for step, path in zip(args[::2], args[1::2]):
    try:
        ctypes.CDLL(path, mode=modes[step])
    except OSError as e:
        print("failed:", e, flush=True)
        sys.exit(1)
print("ready", flush=True)
sys.stdin.read()
