#!/bin/bash
# gpu-proof on this commit: real cases, healthy stacks, python attribution, diagnosis.
set -u
R=$PWD; B=$R/h200/pb; L=$B/bin/ldscope; PY=/opt/torch/.venv/bin/python
export PATH=/opt/torch/.venv/bin:$PATH
W=$(mktemp -d); T0=$(date +%s); el() { echo "   [$(( $(date +%s) - T0 )) s]"; }
mkdir -p "$OUT/cases" "$OUT/stacks" "$OUT/py" "$OUT/diag"
bench/gpu_runs/build_cases.sh "$W/cases" > /dev/null || echo "cases build failed"
cd "$W/cases"
case_run() {
  PYTHONPATH=$W/cases "$PY" -c "$2" > /dev/null 2> "$OUT/cases/$1.bare.err"; echo "== $1 bare: exit $? ($(tail -1 "$OUT/cases/$1.bare.err"))"
  PYTHONPATH=$W/cases "$L" run -o "$OUT/cases/$1.ldscope" --report "$OUT/cases/$1.report.txt" -- "$PY" -c "$2" > "$OUT/cases/$1.run.out" 2>&1
  echo "   traced: exit $?"; head -40 "$OUT/cases/$1.report.txt"; el
}
case_run abi "import torch; import abi_ext"
case_run skew "import torch; import skew_ext"
case_run tls1800 "import torch, sklearn, ctypes; ctypes.CDLL('$W/cases/libie1800.so')"
cd "$R"
echo "== stacks"; timeout 240 scripts/gpu-proof "$B/bin" "$OUT/stacks" stacks 2>&1 | grep -v "^ *\[" | head -120; el
echo "== python"; timeout 120 scripts/gpu-proof "$B/bin" "$OUT/py" python 2>&1 | tail -60; el
echo "== diagnosis-only"; timeout $(( 580 - ($(date +%s) - T0) )) scripts/gpu-proof "$B/bin" "$OUT/diag" diagnosis-only 2>&1 | tail -80; el
rm -f "$OUT"/*/*.ldscope
cd "$OUT" && tar czf results.tgz cases stacks py diag && rm -rf cases stacks py diag
