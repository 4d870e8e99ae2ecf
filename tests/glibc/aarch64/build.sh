#!/usr/bin/env bash
# Cross-builds the audit library and the aarch64 tests' fixtures (this directory's
# CMakeLists.txt) with Debian's aarch64-linux-gnu toolchain.
# usage: build.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
  echo "aarch64 tests need g++-aarch64-linux-gnu and qemu-user-static (scripts/setup installs them)" >&2
  exit 1
fi
cmake -S "$here" -B "$1" -DCMAKE_TOOLCHAIN_FILE="$here/toolchain.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$1" -j "$(nproc)"
