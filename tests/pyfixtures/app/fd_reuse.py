# The program closes every descriptor (the hook's too) and puts a socket of its own at
# the number the hook had: the hook must never write to it.
import os
import socket

os.closerange(3, 1024)
mine, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
for fd in range(600, 664):
    os.dup2(mine.fileno(), fd)
import colorsys  # noqa: E402,F401  (the hook would report this import)
import textwrap  # noqa: E402,F401

mine.send(b"mine")
peer.setblocking(False)
got = []
try:
    while True:
        got.append(peer.recv(100))
except BlockingIOError:
    pass
print(got)
