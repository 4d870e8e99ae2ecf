#!/bin/bash
# Run from the repository root on the GPU machine, with a portable build (ldscope,
# libldscope_audit.so, python/ in h200/pb/bin; bench/null_audit.c built as h200/pb/bench/libnull_audit.so).
# The H200 run: real loader failure classes, healthy stacks, per-process cost, storm, strace.
set -u
R=$PWD; B=$R/h200/pb; L=$B/bin/ldscope; PY=/opt/torch/.venv/bin/python
export PATH=/opt/torch/.venv/bin:$PATH
W=$(mktemp -d); T0=$(date +%s)
el() { echo "   [$(( $(date +%s) - T0 )) s]"; }
echo "== machine: $(uname -srm), $(nproc) CPUs, $(ldd --version | head -1)"; command -v cc make strace gcc
bench/gpu_runs/build_cases.sh "$W/cases" > /dev/null || echo "cases build failed"
TL=$($PY -c "import torch,os;print(os.path.dirname(torch.__file__)+'/lib')" 2>/dev/null)
echo "== torch lib $TL"; readelf -d "$TL/libc10.so" | grep SONAME; nm -D --defined-only "$TL/libc10_cuda.so" | grep -i "9SetDevice" | head
nm -D --defined-only "$TL/libc10.so" | grep "torchCheckFail" | head -3
cd "$W/cases"; mkdir -p "$OUT/cases"
case_run() {  # name, python code
  PYTHONPATH=$W/cases "$PY" -c "$2" > /dev/null 2> "$OUT/cases/$1.bare.err"; echo "== $1 bare: exit $? ($(tail -1 "$OUT/cases/$1.bare.err"))"
  PYTHONPATH=$W/cases "$L" run -o "$OUT/cases/$1.ldscope" --report "$OUT/cases/$1.report.txt" -- "$PY" -c "$2" > "$OUT/cases/$1.run.out" 2>&1
  echo "   traced: exit $?"; cat "$OUT/cases/$1.report.txt" | head -40
  "$L" report --format json "$OUT/cases/$1.ldscope" > "$OUT/cases/$1.report.json" 2>&1; el
}
case_run abi "import torch; import abi_ext"
case_run skew "import torch; import skew_ext"
for n in 256 1800 4096 16384; do case_run tls$n "import torch, sklearn, ctypes; ctypes.CDLL('$W/cases/libie$n.so')"; done
cd "$R"
echo "== storm"; python3 - "$B" "$W" <<'PY'
import os, statistics, subprocess, sys, time
from importlib.machinery import SourceFileLoader
b, w = sys.argv[1], sys.argv[2]
m = SourceFileLoader("benchrun", "bench/run").load_module()
m.STORM = os.path.join(w, "storm"); m.make_storm()
drv = os.path.join(w, "storm_driver"); subprocess.run(["gcc", "-O2", "-o", drv, "bench/storm_driver.c", "-ldl"], check=True)
root = os.path.join(m.STORM, "libstorm0.so")
V = {"bare": ([drv, root], {}), "null auditor": ([drv, root], {"LD_AUDIT": b + "/bench/libnull_audit.so"}),
     "ldscope run": ([b + "/bin/ldscope", "run", "-q", "--no-report", "-o", w + "/s.ldscope", "--", drv, root], {}),
     "LD_DEBUG=libs": ([drv, root], {"LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": w + "/dbg"})}
t = {k: [] for k in V}
for r in range(9):
    for k in (list(V) if r % 2 == 0 else list(V)[::-1]):
        a, e = V[k]; t0 = time.perf_counter(); subprocess.run(a, env={**os.environ, **e}, check=True); t[k].append(time.perf_counter() - t0)
for k in V: print(f"   storm {k}: median {statistics.median(t[k])*1e3:.1f} ms (9 runs), x{statistics.median(t[k])/statistics.median(t['null auditor']):.3f} of null")
PY
el
echo "== strace -c of /bin/true"; for v in bare null datagram ring; do
  case $v in bare) strace -c -o "$OUT/strace_$v.txt" /bin/true;; null) LD_AUDIT=$B/bench/libnull_audit.so strace -c -o "$OUT/strace_$v.txt" /bin/true;;
  *) LDSCOPE_TRANSPORT=$v "$L" run -q --no-report -o "$W/st.ldscope" -- strace -c -o "$OUT/strace_$v.txt" /bin/true;; esac
  echo "   $v: $(tail -1 "$OUT/strace_$v.txt")"; done
el
echo "== healthy stacks"; timeout 200 scripts/gpu-proof "$B/bin" "$OUT/stacks" stacks 2>&1 | grep -v "^ *\[" | head -80; el
echo "== perproc"; timeout $(( 590 - ($(date +%s) - T0) )) python3 bench/perproc --runs 7 --procs 500 --files 50 --build "$B" 2>"$OUT/perproc.err"; tail -3 "$OUT/perproc.err"; el
