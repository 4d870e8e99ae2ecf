# Imports the modules named in $ORDER, in that order (the same command line either way,
# so that `ldscope diff` matches the two runs).
import importlib
import os

for name in os.environ["ORDER"].split(","):
    try:
        importlib.import_module(name)
    except ImportError:
        print(name, "failed")
