# What a program can see of its own interpreter: the same with and without ldscope's
# Python hook (sys.path, sitecustomize, tracebacks through importlib, stack depth).
import importlib
import sys
import traceback

print(sys.path[1:])
print("sitecustomize" in sys.modules, getattr(sys.modules.get("sitecustomize"), "__file__", None))
print(importlib.import_module("json").__name__)
try:
    importlib.import_module("broken_mod")
except RuntimeError:
    traceback.print_exc(file=sys.stdout)
sys.modules.pop("broken_mod", None)
try:
    import no_such_module_zz  # noqa: F401
except ImportError as e:
    print(repr(e))


def depth():
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


print("stack depth", depth())
import broken_mod  # noqa: E402,F401  (an uncaught error at import: traceback, status 1)
