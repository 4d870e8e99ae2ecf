# A process that imports, forks, and whose child imports, forks again, and whose
# grandchild imports extension modules: each image must see everything it inherited.
import os
import _bz2  # noqa: F401

pid = os.fork()
if pid == 0:
    import _lzma  # noqa: F401
    grandchild = os.fork()
    if grandchild == 0:
        import _decimal  # noqa: F401
        import _ctypes  # noqa: F401
        os._exit(0)
    os.waitpid(grandchild, 0)
    os._exit(0)
os.waitpid(pid, 0)
print("forks: ok")
