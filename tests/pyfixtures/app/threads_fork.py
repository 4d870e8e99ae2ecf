# cupy imported in a thread, torch in a forked child through importlib.import_module.
import importlib
import os
import threading


def in_thread():
    import cupy  # noqa: F401


t = threading.Thread(target=in_thread)
t.start()
t.join()
pid = os.fork()
if pid == 0:
    try:
        importlib.import_module("torch")
    except ImportError:
        pass
    os._exit(0)
os.waitpid(pid, 0)
