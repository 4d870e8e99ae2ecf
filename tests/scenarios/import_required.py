# Imports MODULE with SITE first on sys.path, as a program that cannot go on without it:
# an ImportError is printed and ends it with exit status 1.
import importlib, sys
site, module = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
try:
    importlib.import_module(module)
except ImportError as e:
    print(f"import {module}: ImportError: {e}")
    sys.exit(1)
print(f"import {module}: ok")
