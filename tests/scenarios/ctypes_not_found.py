# A ctypes load of a library installed nowhere. With "fatal" the program cannot go on
# without it and ends (exit status 1); without, it notes the absence and goes on.
import ctypes
import sys

try:
    ctypes.CDLL("libnot-there.so.7")
except OSError as e:
    if sys.argv[1:] == ["fatal"]:
        sys.exit("cannot go on: %s" % e)
    print("optional:", e)
