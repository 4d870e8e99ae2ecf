#!/usr/bin/env bash
# Fails when a file references a glibc symbol version newer than MAX (per `objdump -T`):
# such an ldscope does not start, and such an audit library is ignored by the loader
# ("version `GLIBC_2.33' not found"), on every glibc older than that version.
# usage: symbol_versions.sh MAX FILE...   (MAX e.g. 2.28)
set -euo pipefail
max=$1
shift
bad=0
for f in "$@"; do
  if ! out=$(LC_ALL=C objdump -T "$f" 2>&1); then
    # A fully static executable has no dynamic symbol table, hence no versions to need.
    if [[ $out == *"not a dynamic object"* ]] && ! LC_ALL=C readelf -lW "$f" | grep -q 'INTERP\|DYNAMIC'; then
      echo "$f: fully static, needs no glibc symbol version"
      continue
    fi
    echo "$f: objdump -T failed: $out" >&2
    bad=1
    continue
  fi
  refs=$(grep -F '*UND*' <<<"$out" || true)  # what the file needs, not what it defines
  if [[ -z $refs ]] && LC_ALL=C readelf -dW "$f" | grep -q '(NEEDED)'; then
    echo "$f: needs libraries but objdump -T lists no undefined symbol" >&2
    bad=1
    continue
  fi
  if [[ -z $refs ]]; then
    # The audit library links no libc: nothing undefined, no library needed.
    echo "$f: needs no symbol from any library"
    continue
  fi
  versions=$(grep -o '(GLIBC_[0-9][0-9.]*)' <<<"$refs" | tr -d '()' | sed 's/GLIBC_//' | sort -u -V)
  if [[ -z $versions ]]; then
    # A dynamic object that needs symbols needs some from libc; no versions at all means
    # objdump's format is not what this script reads, not that the file is fine.
    echo "$f: no GLIBC_ symbol versions found in objdump -T output" >&2
    bad=1
    continue
  fi
  newest=$(tail -n 1 <<<"$versions")
  newer=$(awk -v max="$max" '{ if ($0 != max) print }' <<<"$(printf '%s\n%s\n' "$versions" "$max" | sort -u -V | sed -n "/^${max//./\\.}\$/,\$p")")
  if [[ -n $newer ]]; then
    echo "$f: references glibc symbol versions newer than GLIBC_$max:" >&2
    for v in $newer; do grep -F "(GLIBC_$v)" <<<"$refs" | sed 's/^/  /' >&2; done
    bad=1
  else
    echo "$f: newest glibc symbol version GLIBC_$newest (limit GLIBC_$max)"
  fi
done
exit $bad
