#!/usr/bin/env bash
# Makes, once per cache directory, a sysroot per Debian suite with that suite's glibc
# and minimal Python (bullseye: glibc 2.31, python3.9; trixie: glibc 2.41, python3.13),
# unpacked from the Debian archive with `apt-get download` + `dpkg-deb -x`, never
# installed, and the dlprobe test driver built against that glibc. Later runs reuse
# the cache. An unreachable archive is an error, never a skip.
# usage: sysroot.sh CACHE_DIR CC DLPROBE_SOURCE SUITE[:ARCH]...   (ARCH: amd64 or arm64;
# arm64's dlprobe is built with Debian's aarch64-linux-gnu-gcc)
# Result: CACHE_DIR/SUITE[-ARCH]/root (the sysroot), CACHE_DIR/SUITE[-ARCH]/dlprobe.
set -euo pipefail
cache=$(realpath -m "$1") cc=$2 dlprobe_src=$(realpath "$3")
shift 3

packages_for() {
  local common="libc6 libc6-dev linux-libc-dev libgcc-s1 zlib1g libexpat1"
  case $1 in
    # python3.X-minimal needs libpython3.X-minimal, libexpat1, zlib1g; its _ssl and
    # _hashlib need OpenSSL (libcrypto.so.3 also libzstd).
    bullseye) echo "$common libcrypt1 libpython3.9-minimal python3.9-minimal libssl1.1" ;;
    trixie) echo "$common libpython3.13-minimal python3.13-minimal libssl3t64 libzstd1 libstdc++6 patchelf" ;;
    *) echo "sysroot.sh: unknown suite $1" >&2; return 1 ;;
  esac
}

make_sysroot() {
  local suite=${1%%:*} arch=amd64 dir=$cache/$1 driver_cc=$cc triplet=x86_64-linux-gnu
  if [[ $1 == *:* ]]; then arch=${1#*:} dir=$cache/$suite-$arch; fi
  case $arch in
    amd64) ;;
    arm64) triplet=aarch64-linux-gnu driver_cc=aarch64-linux-gnu-gcc ;;
    *) echo "sysroot.sh: unknown architecture $arch" >&2; return 1 ;;
  esac
  local packages
  packages=$(packages_for "$suite")
  local stamp="$packages $(sha256sum "$dlprobe_src" | cut -d' ' -f1)"
  if [[ -f $dir/complete && $(cat "$dir/complete") == "$stamp" ]]; then
    echo "sysroot $1: cached in $dir"
    return
  fi
  rm -rf "$dir"
  local apt=$dir/apt
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$apt/sources.list.d" "$dir/root"
  : >"$apt/status"
  echo "deb http://deb.debian.org/debian $suite main" >"$apt/sources.list"
  # Its own index, cache and an empty dpkg status: the machine's apt state is neither
  # used (apt would offer the installed versions) nor changed.
  local opts=(-o "Dir::State::status=$apt/status" -o "Dir::Etc::sourcelist=$apt/sources.list"
              -o "Dir::Etc::sourceparts=$apt/sources.list.d" -o "Dir::State::Lists=$apt/lists"
              -o "Dir::Cache=$apt/cache" -o "APT::Architecture=$arch" -o "Debug::NoLocking=1"
              -o "APT::Sandbox::User=$(id -un)")
  echo "sysroot $1: fetching $packages"
  if ! apt-get "${opts[@]}" -qq update >"$apt/update.log" 2>&1 || grep -q '^[EW]: ' "$apt/update.log"; then
    echo "sysroot $suite: cannot read the Debian archive's $suite index (deb.debian.org):" >&2
    cat "$apt/update.log" >&2
    exit 1
  fi
  # shellcheck disable=SC2086
  if ! (cd "$apt/debs" && apt-get "${opts[@]}" -qq download $packages) >"$apt/download.log" 2>&1; then
    echo "sysroot $suite: apt-get download $packages failed:" >&2
    cat "$apt/download.log" >&2
    exit 1
  fi
  for deb in "$apt/debs"/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
  # Merged /usr (trixie ships /usr/lib only; its libc.so script names /lib/...): the
  # links a merged-/usr system has.
  for d in lib lib64; do
    if [[ -d $dir/root/usr/$d && ! -e $dir/root/$d ]]; then ln -s "usr/$d" "$dir/root/$d"; fi
  done
  # Absolute symlinks (lib64/ld-linux-x86-64.so.2 -> /lib/..., libdl.so -> /lib/...)
  # would lead out of the sysroot into this machine's glibc.
  find "$dir/root" -type l -lname '/*' | while read -r link; do
    ln -sfnr "$dir/root$(readlink "$link")" "$link"
  done
  # The driver against this glibc: crt files and libraries from the sysroot first, so it
  # needs only what this glibc has (built here, it would need GLIBC_2.34's dlopen).
  local lib=$dir/root/usr/lib/$triplet
  "$driver_cc" --sysroot="$dir/root" -B"$lib" -L"$lib" -L"$dir/root/lib/$triplet" -O1 \
    -o "$dir/dlprobe" "$dlprobe_src" -ldl -lpthread
  rm -rf "$apt/lists" "$apt/cache"
  echo "$stamp" >"$dir/complete"
  echo "sysroot $1: made in $dir ($(ls "$apt/debs" | tr '\n' ' '))"
}

mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9
for suite in "$@"; do make_sysroot "$suite"; done
