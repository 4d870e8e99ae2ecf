# Cross-builds ldscope for aarch64 with Debian's aarch64-linux-gnu toolchain
# (g++-aarch64-linux-gnu: the compiler, libstdc++.a, libgcc.a and glibc's libc.a)
# against a tree of Debian arm64 -dev packages (scripts/cross-sysroot makes it) for
# protobuf, c-ares, OpenSSL, zlib, fmt, Boost, CLI11 and toml++. protoc is this
# machine's (the same version as the tree's libprotobuf). Programs the build runs
# (ldscope itself, for its man page and shell completions) run under qemu-user.
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DLDSCOPE_SYSROOT=DIR/root ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# try_compile projects see the toolchain file again, not the cache.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES LDSCOPE_SYSROOT)
if(NOT LDSCOPE_SYSROOT OR NOT EXISTS "${LDSCOPE_SYSROOT}/usr/include/google/protobuf")
  message(FATAL_ERROR "aarch64-linux-gnu.cmake: -DLDSCOPE_SYSROOT=DIR/root names no Debian arm64 tree "
                      "with libprotobuf-dev (scripts/cross-sysroot DIR makes one)")
endif()
set(CMAKE_SYSROOT "${LDSCOPE_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${LDSCOPE_SYSROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
find_program(LDSCOPE_QEMU_AARCH64 qemu-aarch64-static)
if(LDSCOPE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${LDSCOPE_QEMU_AARCH64};-L;${LDSCOPE_SYSROOT}")
endif()
