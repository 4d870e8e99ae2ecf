# ldscope's Python hook. `ldscope run` puts this directory first on PYTHONPATH, so every
# Python in the traced command tree imports this file as `sitecustomize` at start-up.
# While a collector listens on $LDSCOPE_SOCKET (Python 3.8+), it runs _ldscope_hook.py,
# which reports imports and ctypes dlopens so that ldscope can attribute each library
# load to Python code. Then it takes its directory off sys.path again and imports the
# sitecustomize the environment had without it, exactly as Python would have (if there
# is none, it ends as a missing sitecustomize does: no sitecustomize in sys.modules).
# Without a collector it imports nothing and changes nothing.


def _ldscope():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("LDSCOPE_SOCKET")
    if path and sys.version_info >= (3, 8):
        try:
            import stat
            if stat.S_ISSOCK(os.stat(path).st_mode):
                had_socket = "_socket" in sys.modules
                # Through the import system's own loader (its bytecode cache), but not
                # into sys.modules.
                loader = sys.modules["_frozen_importlib_external"].SourceFileLoader(
                    "_ldscope_hook", os.path.join(here, "_ldscope_hook.py"))
                ns = {"__name__": "_ldscope_hook", "__file__": loader.path}
                exec(loader.get_code("_ldscope_hook"), ns)
                ns["install"](path, () if had_socket else ("_socket",))
        except Exception:
            pass

    def ours(p):
        try:
            return isinstance(p, str) and os.path.abspath(p) == here
        except Exception:
            return False

    sys.path[:] = [p for p in sys.path if not ours(p)]
    for p in [p for p in sys.path_importer_cache if ours(p)]:
        del sys.path_importer_cache[p]
    sys.modules.pop("sitecustomize", None)
    import sitecustomize  # noqa: F401  (the environment's own; ImportError if none)


_ldscope()
