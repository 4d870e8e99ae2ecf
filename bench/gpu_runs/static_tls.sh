#!/bin/bash
# Static TLS on the GPU machine: the tunable that lets a late 1,800-byte initial-exec library
# load after torch and sklearn, bare and traced; the report's own tunable applied; which
# late objects have TLS, DF_STATIC_TLS or TLS descriptors. Same set-up as job.sh.
set -u
R=$PWD; B=$R/h200/pb; L=$B/bin/ldscope; PY=/opt/torch/.venv/bin/python
W=$(mktemp -d); bench/gpu_runs/build_cases.sh "$W/cases" > /dev/null
/lib64/ld-linux-x86-64.so.2 --list-tunables | grep -E "static_tls|nns"
C="import torch, sklearn, ctypes; ctypes.CDLL('$W/cases/libie1800.so'); print('ok')"
for n in 512 896 1024 1280 1536 2048 3072 4096 8192 16384; do
  b=$(GLIBC_TUNABLES=glibc.rtld.optional_static_tls=$n $PY -c "$C" 2>&1 | tail -1 | cut -c1-40)
  echo "optional_static_tls=$n bare: $b"
done
for n in 512 640 768 896; do
  t=$(GLIBC_TUNABLES=glibc.rtld.optional_static_tls=$n $L run -q --no-report -o $W/t$n.ldscope -- $PY -c "$C" 2>&1 | grep -v "^ldscope" | tail -1 | cut -c1-40)
  echo "optional_static_tls=$n traced: $t"
done
echo "== LD_PRELOAD=libie1800 bare:"; LD_PRELOAD=$W/cases/libie1800.so $PY -c "$C" 2>&1 | tail -2
echo "== late objects with PT_TLS (size, DF_STATIC_TLS, TLSDESC relocs)"
$L show $W/t512.ldscope 2>/dev/null | grep -o "mapped [^ ]*" | awk '{print $2}' | sort -u | while read f; do
  [ -f "$f" ] || continue
  tls=$(readelf -lW "$f" 2>/dev/null | awk '$1=="TLS"{print $6}')
  [ -n "$tls" ] || continue
  st=$(readelf -dW "$f" | grep -c STATIC_TLS); d=$(readelf -rW "$f" | grep -c TLSDESC)
  echo "$tls static=$st tlsdesc=$d $f"
done | sort | head -40
echo "== the report's tunable (trace at the default), applied bare and traced"
$L report $W/t512.ldscope 2>&1 | grep -E "surplus:|used by:|fix:" | head -4
n=$($L report $W/t512.ldscope 2>&1 | grep '^  fix:' | grep -o 'optional_static_tls=[0-9]*' | head -1)
echo "$n bare: $(GLIBC_TUNABLES=glibc.rtld.$n $PY -c "$C" 2>&1 | tail -1 | cut -c1-50)"
(cd $W && $L run -q --try-fixes --report $W/try.txt -o $W/try.ldscope -- $PY -c "$C" >/dev/null 2>&1); grep -E "fix:|verified" $W/try.txt | head -6
