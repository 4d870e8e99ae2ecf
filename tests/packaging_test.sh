#!/usr/bin/env bash
# Packaging: `cmake --install` gives a working ldscope that finds its audit library
# in <prefix>/lib/ldscope; the portable build depends on nothing but libc.
# usage: packaging_test.sh SOURCE_DIR BUILD_DIR SCRATCH_DIR
set -euo pipefail
src=$1 build=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"

cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
test -x "$scratch/prefix/bin/ldscope"
test -f "$scratch/prefix/lib/ldscope/libldscope_audit.so"
out=$("$scratch/prefix/bin/ldscope" run -q -o "$scratch/t.ldscope" -- /bin/echo installed)
test "$out" = "installed"
"$scratch/prefix/bin/ldscope" show "$scratch/t.ldscope" | grep -q "executable  /usr/bin/echo\|executable  /bin/echo"
# The installed Python hook is found and attributes imports.
test -f "$scratch/prefix/share/ldscope/python/sitecustomize.py"
"$scratch/prefix/bin/ldscope" run -q --no-report -o "$scratch/py.ldscope" -- /usr/bin/python3 -c "import json"
"$scratch/prefix/bin/ldscope" show --format json "$scratch/py.ldscope" | grep -q '"module": "json"'
echo "install: ok"

LDSCOPE_BUILD_DIR="$scratch/portable" "$src/scripts/build" -DLDSCOPE_PORTABLE=ON -DLDSCOPE_TESTS=OFF >/dev/null
for f in ldscope libldscope_audit.so; do
  deps=$(readelf -d "$scratch/portable/bin/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
  echo "portable $f needs: $deps"
  for d in $deps; do
    case $d in libc.so.6|libm.so.6|ld-linux-x86-64.so.2) ;; *) echo "unexpected dependency $d" >&2; exit 1 ;; esac
  done
done
test -f "$scratch/portable/bin/python/sitecustomize.py"
out=$("$scratch/portable/bin/ldscope" run -q -o "$scratch/p.ldscope" -- /bin/echo portable)
test "$out" = "portable"
"$scratch/portable/bin/ldscope" show --format json "$scratch/p.ldscope" | grep -q '"reason": "LOAD_EXECUTABLE"'
echo "portable: ok"
