#!/usr/bin/env bash
# Release artifacts (scripts/dist): the tarball, the wheel and the .deb made from the
# portable build, each installed the way a user would (unpacked and moved; pip into a
# venv, offline; dpkg-deb -x), each then tracing a real `import numpy`.
# usage: dist_test.sh SOURCE_DIR PORTABLE_BUILD_DIR SCRATCH_DIR
set -euo pipefail
trap 'echo "dist_test: line $LINENO failed: $BASH_COMMAND" >&2' ERR
src=$1 portable=$2 scratch=$3
py=/usr/bin/python3
rm -rf "$scratch" && mkdir -p "$scratch"

"$src/scripts/dist" --build-dir "$portable" -o "$scratch/dist" >"$scratch/dist.out"
version=$("$portable/bin/ldscope" --version | sed 's/^ldscope //')
arch=$(uname -m)
tarball=$scratch/dist/ldscope-$version-linux-$arch.tar.gz
deb=$scratch/dist/ldscope_${version}_$(dpkg --print-architecture).deb
wheels=("$scratch/dist"/ldscope-"$version"-py3-none-manylinux_2_*_"$arch".whl)
wheel=${wheels[0]}
test -f "$tarball" && test -f "$deb" && test -f "$wheel"
printf '%s\n' "$tarball" "$wheel" "$deb" | diff - "$scratch/dist.out"
(cd "$scratch/dist" && sha256sum --quiet -c SHA256SUMS)
# Reproducible: the same build gives the same bytes.
"$src/scripts/dist" --build-dir "$portable" -o "$scratch/again" >/dev/null
diff "$scratch/dist/SHA256SUMS" "$scratch/again/SHA256SUMS"

# The listings, whole (version and the Python hook's bytecode tag normalised).
norm() { sed -e "s/${version//./\\.}/VERSION/g" -e 's/cpython-[0-9]*/cpython-XY/' -e "s/$arch/ARCH/g"; }
expect() {  # expect GOLDEN: stdin must equal tests/golden/GOLDEN (LDSCOPE_UPDATE_GOLDEN=1 rewrites it)
  if [[ -n ${LDSCOPE_UPDATE_GOLDEN:-} ]]; then cat >"$src/tests/golden/$1"; return; fi
  if ! diff -u "$src/tests/golden/$1" -; then echo "dist_test: $1 differs" >&2; exit 1; fi
}
tar tzvf "$tarball" | awk '{print $1, $2, $6}' | norm | expect dist_tarball.txt
"$py" - "$wheel" <<'EOF' | norm | expect dist_wheel.txt
import sys, zipfile
for i in zipfile.ZipFile(sys.argv[1]).infolist():
    print("%o" % (i.external_attr >> 16), i.filename)
EOF
dpkg-deb --contents "$deb" | awk '{print $1, $2, $6}' | norm | expect dist_deb_contents.txt

# The wheel's tag and the .deb's libc6 dependency say what the binaries really need:
# the newest GLIBC_2.N they reference, at least 2.28.
newest=28
for f in "$portable/bin/ldscope" "$portable/bin/libldscope_audit.so"; do
  for n in $(objdump -p "$f" | sed -n 's/.*GLIBC_2\.\([0-9]*\).*/\1/p'); do
    if ((n > newest)); then newest=$n; fi
  done
done
test "$(basename "$wheel")" = "ldscope-$version-py3-none-manylinux_2_${newest}_$arch.whl"
dpkg-deb --field "$deb" Depends | diff - <(echo "libc6 (>= 2.$newest)")
dpkg-deb --field "$deb" Package Version Architecture | diff - <(printf 'Package: ldscope\nVersion: %s\nArchitecture: %s\n' "$version" "$(dpkg --print-architecture)")
# Wheel's RECORD: wheel's own reader checks every file's hash and size.
"$py" -m wheel unpack -d "$scratch/wheel-unpacked" "$wheel" >/dev/null

# The licence (Apache-2.0) in each artifact: the tarball and the wheel carry its text,
# the wheel's metadata names it (PEP 639), the .deb has Debian's copyright file.
tar xzOf "$tarball" "ldscope-$version-linux-$arch/share/doc/ldscope/LICENSE" | cmp - "$src/LICENSE"
wheel_file() { "$py" -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' "$wheel" "$1"; }
wheel_file "ldscope-$version.dist-info/licenses/LICENSE" | cmp - "$src/LICENSE"
wheel_file "ldscope-$version.dist-info/METADATA" | grep -E '^(Metadata-Version|License-Expression|License-File):' |
  diff - <(printf 'Metadata-Version: 2.4\nLicense-Expression: Apache-2.0\nLicense-File: LICENSE\n')
dpkg-deb --fsys-tarfile "$deb" | tar xOf - ./usr/share/doc/ldscope/copyright >"$scratch/copyright"
grep -Fx 'License: Apache-2.0' "$scratch/copyright" >/dev/null
grep -F '/usr/share/common-licenses/Apache-2.0' "$scratch/copyright" >/dev/null

# An installed ldscope traces `import numpy`: the loads are attributed to the import,
# the audit library and the hook are the install's own, and the report is clean.
# usage: traces NAME LDSCOPE AUDIT_LIB HOOK_DIR PYTHON
traces() {
  local name=$1 ldscope=$2 audit=$3 hook=$4 python=$5 dir=$scratch/$1-run
  mkdir -p "$dir"
  (cd "$dir" && "$ldscope" run -q -o numpy.ldscope --report report.txt -- "$python" -c "import numpy")
  echo "no findings" | diff - "$dir/report.txt"
  "$ldscope" show --format json "$dir/numpy.ldscope" >"$dir/show.json"
  "$py" - "$dir/show.json" >"$dir/summary.txt" <<'EOF'
import json, sys
procs = [p for p in json.load(open(sys.argv[1]))["processes"] if p.get("python")]
assert len(procs) == 1, [p["exe"] for p in procs]
p = procs[0]
print("audit:", p["env"]["LD_AUDIT"])
print("hook:", p["env"]["PYTHONPATH"].split(":")[0])
spans = [i for i in p["imports"] if i["module"] == "numpy"]
for i in spans:
    print("import numpy at %s:%d, top level %s, ended %s, failed %s" % (
        i["site"]["file"], i["site"]["line"], "parent" not in i, i.get("ended", False),
        i.get("failed", False)))
loads = [e["load"] for e in p["entries"]
         if "load" in e and e["load"].get("python", {}).get("topModule") == "numpy"]
print("libraries loaded during import numpy:", "some" if loads else "none")
EOF
  diff -u - "$dir/summary.txt" <<EOF
audit: $audit
hook: $hook
import numpy at <string>:1, top level True, ended True, failed False
libraries loaded during import numpy: some
EOF
  echo "$name: ok"
}

# Tarball: unpacked, then moved elsewhere; also started through a symlink.
mkdir -p "$scratch/unpacked" "$scratch/links"
tar xzf "$tarball" -C "$scratch/unpacked"
mv "$scratch/unpacked/ldscope-$version-linux-$arch" "$scratch/moved"
t=$scratch/moved
traces tarball "$t/bin/ldscope" "$t/lib/ldscope/libldscope_audit.so" "$t/share/ldscope/python" "$py"
ln -s "$t/bin/ldscope" "$scratch/links/ldscope"
"$scratch/links/ldscope" run -q --no-report -o "$scratch/link.ldscope" -- /bin/true
"$t/bin/ldscope" show --format json "$scratch/link.ldscope" | grep -F "\"LD_AUDIT\": \"$t/lib/ldscope/libldscope_audit.so\"" >/dev/null

# Wheel: pip in a fresh venv, offline (--isolated: no index or links from the
# environment's configuration), the `ldscope` console command, the venv's python.
"$py" -m venv --system-site-packages "$scratch/venv"
v=$scratch/venv
"$v/bin/pip" --isolated install --no-index --no-cache-dir --disable-pip-version-check -q "$wheel"
site=$("$v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
traces wheel "$v/bin/ldscope" "$site/ldscope/data/lib/ldscope/libldscope_audit.so" \
  "$site/ldscope/data/share/ldscope/python" "$v/bin/python"
test "$("$v/bin/ldscope" --version)" = "ldscope $version"
# RECORD lists everything pip installed: uninstalling leaves nothing behind.
"$v/bin/pip" --isolated uninstall -y -q ldscope
test ! -e "$v/bin/ldscope" && test ! -e "$site/ldscope"

# The man page and the shell completions: in the tarball and the .deb (the man page
# gzipped there), the same bytes as the build's, the man page rendering without
# warnings and bash's completion completing.
for f in share/man/man1/ldscope.1 share/bash-completion/completions/ldscope share/zsh/vendor-completions/_ldscope; do
  tar xzOf "$tarball" "ldscope-$version-linux-$arch/$f" | cmp - "$portable/$f"
done
dpkg-deb --fsys-tarfile "$deb" | tar xOf - ./usr/share/man/man1/ldscope.1.gz | gunzip | cmp - "$portable/share/man/man1/ldscope.1"
for f in share/bash-completion/completions/ldscope share/zsh/vendor-completions/_ldscope; do
  dpkg-deb --fsys-tarfile "$deb" | tar xOf - "./usr/$f" | cmp - "$portable/$f"
done

# .deb: the control file, then its files under a scratch root.
dpkg-deb --info "$deb" control >/dev/null
dpkg-deb -x "$deb" "$scratch/root"
r=$scratch/root/usr
traces deb "$r/bin/ldscope" "$r/lib/ldscope/libldscope_audit.so" "$r/share/ldscope/python" "$py"
MANWIDTH=80 man --warnings -l "$r/share/man/man1/ldscope.1.gz" 2>"$scratch/man.err" | grep -F "ldscope report" >/dev/null
test ! -s "$scratch/man.err"
test "$(bash --norc --noprofile -c 'source "$1"; COMP_WORDS=(ldscope rep); COMP_CWORD=1; _ldscope; echo "${COMPREPLY[*]}"' \
  _ "$r/share/bash-completion/completions/ldscope")" = report
