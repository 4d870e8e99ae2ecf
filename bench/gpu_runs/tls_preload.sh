#!/bin/bash
# Static TLS on the GPU machine: LD_PRELOAD of the late 1,800-byte initial-exec library, bare,
# traced, and under the null auditor (bench/null_audit.c): any LD_AUDIT module lays the block
# out before the libraries, so the preload leaves libgomp.so.1 too little. Same set-up as job.sh.
set -u
R=$PWD; B=$R/h200/pb; L=$B/bin/ldscope; PY=/opt/torch/.venv/bin/python
W=$(mktemp -d); bench/gpu_runs/build_cases.sh "$W/cases" > /dev/null
C="import torch, sklearn, ctypes; ctypes.CDLL('$W/cases/libie1800.so'); print('ok')"
echo "== bare preload"; LD_PRELOAD=$W/cases/libie1800.so $PY -c "$C" 2>&1 | tail -2
echo "== traced preload"; LD_PRELOAD=$W/cases/libie1800.so $L run -o $W/p.ldscope --report $W/p.txt -- $PY -c "$C" 2>&1 | tail -4; cat $W/p.txt | head -30
echo "== traced preload, no python hook"; LD_PRELOAD=$W/cases/libie1800.so $L run -q --no-python-hook --no-report -o $W/q.ldscope -- $PY -c "$C" 2>&1 | tail -3
echo "== LD_AUDIT null + preload"; LD_AUDIT=$B/bench/libnull_audit.so LD_PRELOAD=$W/cases/libie1800.so $PY -c "$C" 2>&1 | tail -2
echo "== traced, no preload, 768"; GLIBC_TUNABLES=glibc.rtld.optional_static_tls=768 $L run -q --no-report -o $W/r.ldscope -- $PY -c "$C" 2>&1 | tail -2
cp $W/p.ldscope $OUT/ 2>/dev/null
