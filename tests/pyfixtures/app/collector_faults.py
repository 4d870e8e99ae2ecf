# Stops (SIGSTOP) or kills (SIGKILL) the collector mid-run, given its pid (0: none),
# then goes on importing, loading with ctypes and forking: the program's output and
# exit status must stay its own.
import os
import signal
import sys

mode, collector = sys.argv[1], int(sys.argv[2])
import json  # noqa: E402,F401  (reported while the collector still listens)

if collector:
    os.kill(collector, signal.SIGSTOP if mode == "stop" else signal.SIGKILL)
for name in ["textwrap", "string", "fractions", "colorsys", "calendar", "difflib", "pprint",
             "shlex", "glob", "html.parser", "email.message", "ipaddress", "statistics",
             "configparser", "gettext", "tokenize", "dataclasses", "queue", "sched"]:
    __import__(name)
for _ in range(400):  # more events than the socket's buffer holds
    sys.modules.pop("colorsys")
    __import__("colorsys")
import ctypes  # noqa: E402

ctypes.CDLL("libm.so.6")
if collector and mode == "stop":
    os.kill(collector, signal.SIGCONT)
    # The hook drops without waiting until a send works again: give the collector time
    # to drain its queue, then import once more (that event carries the drop count).
    import time
    for _ in range(100):
        time.sleep(0.01)
        sys.modules.pop("colorsys")
        __import__("colorsys")
    import wave  # noqa: F401
child = os.fork()
if child == 0:
    import plistlib  # noqa: F401
    os._exit(7)
_, status = os.waitpid(child, 0)
print("done", status >> 8)
