# ldscope's Python hook. `ldscope run` puts this directory first on PYTHONPATH, so every
# Python in the traced command tree imports this file as `sitecustomize` at start-up.
# While a collector listens on $LDSCOPE_SOCKET (Python 3.8+), it runs _ldscope_hook.py,
# which reports imports and ctypes dlopens so that ldscope can attribute each library
# load to Python code. Then it takes its directory off sys.path again and imports the
# sitecustomize the environment had without it, exactly as Python would have (if there
# is none, it ends as a missing sitecustomize does: no sitecustomize in sys.modules).
# Without a collector it imports nothing and changes nothing.


def _code(os, sys, here, source):
    # The hook's bytecode as the build compiled it (PEP 552: hash-based, unchecked, which
    # Python's own loader would take as it is too), read here directly: going through
    # the import system's loader cost more than the rest of this file. Any other case
    # (another Python, no such file) goes through the loader, which compiles it.
    external = sys.modules["_frozen_importlib_external"]
    try:
        tag = sys.implementation.cache_tag
        fd = os.open(os.path.join(here, "__pycache__", "_ldscope_hook.%s.pyc" % tag),
                     os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 1 << 20)
        finally:
            os.close(fd)
        if data[:4] == external.MAGIC_NUMBER and data[4:8] == b"\x01\x00\x00\x00":
            import marshal
            import _imp
            code = marshal.loads(memoryview(data)[16:])
            _imp._fix_co_filename(code, source)  # as the loader does: the frames' file
            return code
    except Exception:
        pass
    return external.SourceFileLoader("_ldscope_hook", source).get_code("_ldscope_hook")


def _ldscope():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("LDSCOPE_SOCKET")
    if path and sys.version_info >= (3, 8):
        try:
            if os.stat(path).st_mode & 0o170000 == 0o140000:  # S_ISSOCK
                had_socket = "_socket" in sys.modules
                source = os.path.join(here, "_ldscope_hook.py")
                ns = {"__name__": "_ldscope_hook", "__file__": source}
                exec(_code(os, sys, here, source), ns)  # not into sys.modules
                ns["install"](path, () if had_socket else ("_socket",))
        except Exception:
            pass

    def ours(p):
        try:
            if p == here:
                return True
            if not isinstance(p, str) or (p[:1] == "/" and "//" not in p and "/." not in p and p[-1:] != "/"):
                return False  # not a string, or an absolute path that os.path.abspath keeps
            return os.path.abspath(p) == here
        except Exception:
            return False

    sys.path[:] = [p for p in sys.path if not ours(p)]
    for p in [p for p in sys.path_importer_cache if ours(p)]:
        del sys.path_importer_cache[p]
    sys.modules.pop("sitecustomize", None)
    import sitecustomize  # noqa: F401  (the environment's own; ImportError if none)


_ldscope()
