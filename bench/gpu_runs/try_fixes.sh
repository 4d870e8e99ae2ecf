#!/bin/bash
# run --try-fixes on the H200: the seed (a package preloads an old NCCL, then torch) and
# static TLS pressure (torch, sklearn, then a late initial-exec library).
set -u
R=$PWD; B=$R/h200/pb; L=$B/bin/ldscope; PY=/opt/torch/.venv/bin/python
export PATH=/opt/torch/.venv/bin:$PATH
W=$(mktemp -d); T0=$(date +%s); el() { echo "   [$(( $(date +%s) - T0 )) s]"; }
bench/gpu_runs/build_cases.sh "$W/cases" > /dev/null || echo "cases build failed"
libdir=/usr/lib/x86_64-linux-gnu
printf 'const char v[]="NCCL version 2.16.2+cuda11.8";\nint ncclGetVersion(int*x){*x=21602;return 0;}\n' |
  gcc -shared -fPIC -Wl,-soname,libnccl.so.2 -o $libdir/libnccl.so.2.16.2 -x c -
app=$W/app; mkdir -p "$app/legacy_gpu"
printf 'from legacy_gpu import _environment\n\n_environment.preload()\n' > "$app/legacy_gpu/__init__.py"
printf 'import ctypes\n\n\ndef preload():\n    ctypes.CDLL("libnccl.so.2.16.2")\n' > "$app/legacy_gpu/_environment.py"
printf '# train.py\nimport legacy_gpu\nimport torch\nprint("torch", torch.__version__)\n' > "$app/train.py"
echo "== seed: train.py (import legacy_gpu, then torch) under run --try-fixes"
(cd "$app" && "$L" run -q --try-fixes --report "$OUT/seed_try.txt" -o "$W/seed.ldscope" -- "$PY" train.py > /dev/null 2> "$OUT/seed_try.err"); echo "   exit $?"
cat "$OUT/seed_try.txt"; tail -3 "$OUT/seed_try.err"; el
echo "== the swap applied by hand"; (cd "$app" && printf '# train.py\nimport torch\nimport legacy_gpu\nprint("torch", torch.__version__)\n' > train2.py && "$PY" train2.py 2>&1 | tail -1)
rm -f $libdir/libnccl.so.2.16.2
echo "== static TLS: torch, sklearn, libie1800 under run --try-fixes"
(cd "$W/cases" && "$L" run -q --try-fixes --report "$OUT/tls_try.txt" -o "$W/tls.ldscope" -- "$PY" -c "import torch, sklearn, ctypes; ctypes.CDLL('$W/cases/libie1800.so'); print('loaded')" > /dev/null 2> "$OUT/tls_try.err"); echo "   exit $?"
head -12 "$OUT/tls_try.txt"; tail -3 "$OUT/tls_try.err"; el
echo "== the tunable applied by hand, bare"
n=$(grep '^  fix:' "$OUT/tls_try.txt" | grep -o 'optional_static_tls=[0-9]*' | head -1)
GLIBC_TUNABLES=glibc.rtld.$n "$PY" -c "import torch, sklearn, ctypes; ctypes.CDLL('$W/cases/libie1800.so'); print('loaded with', '$n')" 2>&1 | tail -1
el
