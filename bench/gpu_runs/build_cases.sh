#!/bin/bash
# Builds the real-case fixtures into $1: two extension modules built "against another
# torch" (one with the old C++ ABI, one naming a c10::cuda function of another version),
# and initial-exec TLS libraries of several sizes.
set -e; d=$1; mkdir -p "$d/stub"
cd "$d"
for s in c10 c10_cuda; do echo "" | gcc -shared -fPIC -Wl,-soname,lib$s.so -o stub/lib$s.so -x c -; done
cat > abi_ext.c <<'C'
/* torch's TORCH_CHECK failure path, as an extension built with _GLIBCXX_USE_CXX11_ABI=0 names it */
extern void check_fail(const char*, const char*, unsigned, const void*) __asm__("_ZN3c106detail14torchCheckFailEPKcS2_jRKSs");
void* PyInit_abi_ext(void) { check_fail(0, 0, 0, 0); return 0; }
C
gcc -shared -fPIC -o abi_ext.so abi_ext.c -Wl,--no-as-needed -Lstub -lc10
cat > skew_ext.c <<'C'
/* c10::cuda::SetDevice(int), as an extension built against a torch whose DeviceIndex was int */
extern int set_device(int) __asm__("_ZN3c104cuda9SetDeviceEi");
void* PyInit_skew_ext(void) { set_device(0); return 0; }
C
gcc -shared -fPIC -o skew_ext.so skew_ext.c -Wl,--no-as-needed -Lstub -lc10_cuda -lc10
for n in 256 1800 4096 16384; do
  printf '__thread char tls_block[%d] __attribute__((tls_model("initial-exec")));\nchar* ie_tls(void) { return tls_block; }\n' $n |
    gcc -shared -fPIC -ftls-model=initial-exec -o libie$n.so -x c -
done
