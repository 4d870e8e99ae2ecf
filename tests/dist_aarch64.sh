#!/usr/bin/env bash
# The aarch64 release artifacts (scripts/dist --arch aarch64, cross-built) and the arm64
# tree that runs them: each artifact checked as dist_test.sh checks this machine's (the
# same listings), then installed the way a user would (the tarball unpacked and moved,
# the wheel by pip for a manylinux_2_28_aarch64 machine, the .deb by dpkg-deb -x) for
# dist_aarch64_test, which traces the tree's arm64 python3 with each under qemu-user.
# usage: dist_aarch64.sh SOURCE_DIR CROSS_BUILD_DIR PYTHON_ROOT_DIR SCRATCH_DIR HOST_LDSCOPE
# Result: SCRATCH_DIR/{tarball,wheel,deb} (the installs), PYTHON_ROOT_DIR/root (Debian
# bookworm's arm64 python3.11 and what `import json, ctypes` loads).
set -euo pipefail
trap 'echo "dist_aarch64: line $LINENO failed: $BASH_COMMAND" >&2' ERR
src=$1 cross=$2 pyroot=$3 scratch=$4 host_ldscope=$5
py=/usr/bin/python3
rm -rf "$scratch" && mkdir -p "$scratch"

# python3 (python3-minimal's link to python3.11), the stdlib's lib-dynload (_ctypes)
# and what they need.
"$src/scripts/cross-sysroot" "$pyroot" libc6 libgcc-s1 zlib1g libexpat1 libffi8 \
  python3.11-minimal libpython3.11-minimal libpython3.11-stdlib python3-minimal

"$src/scripts/dist" --arch aarch64 --build-dir "$cross" -o "$scratch/dist" >"$scratch/dist.out"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$cross/CMakeCache.txt")
tarball=$scratch/dist/ldscope-$version-linux-aarch64.tar.gz
wheel=$scratch/dist/ldscope-$version-py3-none-manylinux_2_28_aarch64.whl
deb=$scratch/dist/ldscope_${version}_arm64.deb
printf '%s\n' "$tarball" "$wheel" "$deb" | diff - "$scratch/dist.out"
(cd "$scratch/dist" && sha256sum --quiet -c SHA256SUMS)
# Reproducible: the same build gives the same bytes.
"$src/scripts/dist" --arch aarch64 --build-dir "$cross" -o "$scratch/again" >/dev/null
diff "$scratch/dist/SHA256SUMS" "$scratch/again/SHA256SUMS"

# The binaries are aarch64's, and need no library at all (ldscope is static, the audit
# library links no libc): manylinux_2_28 and libc6 (>= 2.28) promise no more than that.
for f in "$cross/bin/ldscope" "$cross/bin/libldscope_audit.so"; do
  aarch64-linux-gnu-readelf -h "$f" | grep -E '^ +Machine: +AArch64$' >/dev/null
  if aarch64-linux-gnu-readelf -d "$f" | grep -E '\(NEEDED\)|\(VERNEED\)'; then
    echo "dist_aarch64: $f needs a library" >&2
    exit 1
  fi
done
dpkg-deb --field "$deb" Package Version Architecture Depends | diff - <(
  printf 'Package: ldscope\nVersion: %s\nArchitecture: arm64\nDepends: libc6 (>= 2.28)\n' "$version")

# The listings: the same files as this machine's artifacts (dist_test.sh's goldens).
norm() { sed -e "s/${version//./\\.}/VERSION/g" -e 's/cpython-[0-9]*/cpython-XY/' -e "s/aarch64/ARCH/g"; }
tar tzvf "$tarball" | awk '{print $1, $2, $6}' | norm | diff -u "$src/tests/golden/dist_tarball.txt" -
"$py" - "$wheel" <<'EOF' | norm | diff -u "$src/tests/golden/dist_wheel.txt" -
import sys, zipfile
for i in zipfile.ZipFile(sys.argv[1]).infolist():
    print("%o" % (i.external_attr >> 16), i.filename)
EOF
dpkg-deb --contents "$deb" | awk '{print $1, $2, $6}' | norm | diff -u "$src/tests/golden/dist_deb_contents.txt" -
"$py" -m wheel unpack -d "$scratch/wheel-unpacked" "$wheel" >/dev/null

# The man page and completions were written by the aarch64 binary itself (under
# qemu-user): the same text as this machine's ldscope writes.
for shell in man bash zsh; do
  case $shell in
    man) f=share/man/man1/ldscope.1 ;;
    bash) f=share/bash-completion/completions/ldscope ;;
    zsh) f=share/zsh/vendor-completions/_ldscope ;;
  esac
  "$host_ldscope" generate "$shell" -o "$scratch/generated.$shell"
  tar xzOf "$tarball" "ldscope-$version-linux-aarch64/$f" | cmp - "$scratch/generated.$shell"
done

# Installs. The tarball: unpacked, then moved.
mkdir -p "$scratch/unpacked"
tar xzf "$tarball" -C "$scratch/unpacked"
mv "$scratch/unpacked/ldscope-$version-linux-aarch64" "$scratch/tarball"
# The wheel: pip installs it for an aarch64 machine with glibc 2.28 (it refuses a wheel
# whose tag that machine could not run), offline.
"$py" -m pip --isolated install --no-index --no-cache-dir --disable-pip-version-check -q --no-deps \
  --root-user-action=ignore --only-binary=:all: --platform manylinux_2_28_aarch64 --python-version 3.11 --implementation cp \
  --target "$scratch/wheel" "$wheel"
# The .deb: its files under a scratch root.
dpkg-deb -x "$deb" "$scratch/deb"
echo "dist_aarch64: ok"
