# Imports MODULE with SITE first on sys.path, and says how that went: an ImportError is
# what some scenarios are about, not a failure of this script.
import importlib, sys
site, module = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
try:
    importlib.import_module(module)
    print(f"import {module}: ok")
except ImportError as e:
    print(f"import {module}: ImportError: {e}")
