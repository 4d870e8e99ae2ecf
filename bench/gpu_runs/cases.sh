#!/bin/bash
# Run from the repository root on the GPU machine, with a portable build (ldscope,
# libldscope_audit.so, python/ in h200/pb/bin; bench/null_audit.c built as h200/pb/bench/libnull_audit.so).
set -u
R=$PWD; B=$R/h200/pb; L=$B/bin/ldscope; PY=/opt/torch/.venv/bin/python
W=$(mktemp -d); bench/gpu_runs/build_cases.sh "$W/cases" > /dev/null; cd "$W/cases"; mkdir -p "$W/o"
TL=$($PY -c "import torch,os;print(os.path.dirname(torch.__file__)+'/lib')" 2>/dev/null)
nm -D --defined-only "$TL/libc10_cuda.so" | grep -i "SetDevice" | head -5
one() {
  PYTHONPATH=$W/cases "$PY" -c "$2" > /dev/null 2> "$W/o/$1.bare.err"; echo "== $1 bare: exit $? ($(tail -1 "$W/o/$1.bare.err"))"
  PYTHONPATH=$W/cases "$L" run -o "$W/o/$1.ldscope" --report "$W/o/$1.report.txt" -- "$PY" -c "$2" > "$W/o/$1.run.out" 2>&1
  echo "   traced: exit $? ($(tail -1 "$W/o/$1.run.out"))"; grep -E "^[a-z]+\[" "$W/o/$1.report.txt"; tail -1 "$W/o/$1.report.txt"
}
one skew "import torch; import skew_ext"
for n in 256 1800 4096 16384; do one tls$n "import torch, sklearn, ctypes; ctypes.CDLL('$W/cases/libie$n.so')"; done
cp "$W/o/"*.report.txt "$OUT/"; tar czf "$OUT/traces.tgz" -C "$W/o" .
