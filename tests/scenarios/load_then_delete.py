# Loads LIB (ctypes), waits until another process has opened it too (the collector of
# `ldscope run` reading its ELF facts while the program runs: once open, the file can be
# read whatever happens to its name), at most TIMEOUT seconds, then deletes it and exits.
# Prints how many times LIB was opened. (Opens, not closes: a file's close is reported
# when its last mapping goes, and ld.so keeps the library mapped.)
# usage: load_then_delete.py LIB [TIMEOUT]
import ctypes, os, select, struct, sys, time

lib = sys.argv[1]
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
libc = ctypes.CDLL(None, use_errno=True)
IN_OPEN = 0x20
fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
if fd < 0 or libc.inotify_add_watch(fd, os.fsencode(lib), IN_OPEN) < 0:
    sys.exit("inotify: " + os.strerror(ctypes.get_errno()))
ctypes.CDLL(lib)  # ld.so opens it: one open
opens = 0
deadline = time.monotonic() + timeout
while opens < 2 and time.monotonic() < deadline:
    if not select.select([fd], [], [], 0.1)[0]:
        continue
    data = os.read(fd, 4096)
    pos = 0
    while pos + 16 <= len(data):
        _, mask, _, name_len = struct.unpack_from("iIII", data, pos)
        if mask & IN_OPEN:
            opens += 1
        pos += 16 + name_len
os.remove(lib)
print("opened", opens, "times")
