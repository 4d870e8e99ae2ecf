#!/usr/bin/env bash
# Packaging: `cmake --install` gives a working ldscope that finds its audit library
# in <prefix>/lib/ldscope; the portable build depends on nothing but libc.
# usage: packaging_test.sh SOURCE_DIR BUILD_DIR SCRATCH_DIR
set -euo pipefail
trap 'echo "packaging_test: line $LINENO failed: $BASH_COMMAND" >&2' ERR
src=$1 build=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"

cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
test -x "$scratch/prefix/bin/ldscope"
test -f "$scratch/prefix/lib/ldscope/libldscope_audit.so"
out=$("$scratch/prefix/bin/ldscope" run -q -o "$scratch/t.ldscope" -- /bin/echo installed)
test "$out" = "installed"
# (grep reads the whole output: grep -q would end the pipe early, and pipefail would
# then fail on ldscope's SIGPIPE)
"$scratch/prefix/bin/ldscope" show "$scratch/t.ldscope" | grep "executable  /usr/bin/echo\|executable  /bin/echo" >/dev/null
# The installed Python hook is found and attributes imports.
test -f "$scratch/prefix/share/ldscope/python/sitecustomize.py"
test -f "$scratch/prefix/share/ldscope/python/_ldscope_hook.py"
ls "$scratch/prefix/share/ldscope/python/__pycache__/"_ldscope_hook.cpython-*.pyc >/dev/null
"$scratch/prefix/bin/ldscope" run -q --no-report -o "$scratch/py.ldscope" -- /usr/bin/python3 -c "import json"
"$scratch/prefix/bin/ldscope" show --format json "$scratch/py.ldscope" | grep '"module": "json"' >/dev/null
echo "install: ok"

LDSCOPE_BUILD_DIR="$scratch/portable" "$src/scripts/build" -DLDSCOPE_PORTABLE=ON -DLDSCOPE_TESTS=OFF >/dev/null
for f in ldscope libldscope_audit.so; do
  deps=$(readelf -d "$scratch/portable/bin/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
  echo "portable $f needs: $deps"
  for d in $deps; do
    case $d in libc.so.6|libm.so.6|ld-linux-x86-64.so.2) ;; *) echo "unexpected dependency $d" >&2; exit 1 ;; esac
  done
done
# ... and on glibc 2.28 and later.
"$src/tests/glibc/symbol_versions.sh" 2.28 "$scratch/portable/bin/ldscope" "$scratch/portable/bin/libldscope_audit.so"
test -f "$scratch/portable/bin/python/sitecustomize.py"
out=$("$scratch/portable/bin/ldscope" run -q -o "$scratch/p.ldscope" -- /bin/echo portable)
test "$out" = "portable"
"$scratch/portable/bin/ldscope" show --format json "$scratch/p.ldscope" | grep '"reason": "LOAD_EXECUTABLE"' >/dev/null
echo "portable: ok"
