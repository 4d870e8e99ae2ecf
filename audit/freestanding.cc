// The few C library string functions the audit library uses, its own (it links no libc:
// see sys.h), including those the compiler emits calls to by itself (memcpy, memset and
// memmove for copies and zeroing of large objects). Hidden: they bind inside the library
// and are never seen by the program (exports.map exports only la_*).
//
// Compiled with -fno-builtin and without loop-idiom recognition (audit/CMakeLists.txt):
// otherwise the compiler would turn these very loops back into calls to themselves.
#include <cstddef>
#include <cstdint>

#define LDSCOPE_HIDDEN extern "C" __attribute__((visibility("hidden")))

namespace {

inline uint64_t Load8(const unsigned char* p) {
  uint64_t v;
  __builtin_memcpy(&v, p, 8);  // one unaligned load, expanded inline
  return v;
}

inline void Store8(unsigned char* p, uint64_t v) { __builtin_memcpy(p, &v, 8); }

}  // namespace

LDSCOPE_HIDDEN void* memcpy(void* __restrict dst, const void* __restrict src, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (; n >= 8; n -= 8, d += 8, s += 8) Store8(d, Load8(s));
  for (; n > 0; --n) *d++ = *s++;
  return dst;
}

LDSCOPE_HIDDEN void* memmove(void* dst, const void* src, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (d == s || n == 0) return dst;
  if (reinterpret_cast<uintptr_t>(d) - reinterpret_cast<uintptr_t>(s) >= n) {
    // No overlap that a forward copy would trample (dst below src, or past its end).
    for (; n >= 8; n -= 8, d += 8, s += 8) Store8(d, Load8(s));
    for (; n > 0; --n) *d++ = *s++;
  } else {
    d += n;
    s += n;
    for (; n >= 8; n -= 8) {
      d -= 8;
      s -= 8;
      Store8(d, Load8(s));
    }
    for (; n > 0; --n) *--d = *--s;
  }
  return dst;
}

LDSCOPE_HIDDEN void* memset(void* dst, int c, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const uint64_t v = 0x0101010101010101ull * static_cast<unsigned char>(c);
  for (; n >= 8; n -= 8, d += 8) Store8(d, v);
  for (; n > 0; --n) *d++ = static_cast<unsigned char>(c);
  return dst;
}

LDSCOPE_HIDDEN int memcmp(const void* a, const void* b, size_t n) {
  const auto* p = static_cast<const unsigned char*>(a);
  const auto* q = static_cast<const unsigned char*>(b);
  for (; n >= 8 && Load8(p) == Load8(q); n -= 8, p += 8, q += 8) {
  }
  for (; n > 0; --n, ++p, ++q)
    if (*p != *q) return *p < *q ? -1 : 1;
  return 0;
}

// clang turns memcmp(...) == 0 into a call to bcmp.
LDSCOPE_HIDDEN int bcmp(const void* a, const void* b, size_t n) { return memcmp(a, b, n); }

LDSCOPE_HIDDEN void* memchr(const void* s, int c, size_t n) {
  const auto* p = static_cast<const unsigned char*>(s);
  for (; n > 0; --n, ++p)
    if (*p == static_cast<unsigned char>(c)) return const_cast<unsigned char*>(p);
  return nullptr;
}

LDSCOPE_HIDDEN size_t strlen(const char* s) {
  const char* p = s;
  while (*p != '\0') ++p;
  return static_cast<size_t>(p - s);
}

LDSCOPE_HIDDEN size_t strnlen(const char* s, size_t max) {
  size_t n = 0;
  while (n < max && s[n] != '\0') ++n;
  return n;
}

LDSCOPE_HIDDEN int strcmp(const char* a, const char* b) {
  const auto* p = reinterpret_cast<const unsigned char*>(a);
  const auto* q = reinterpret_cast<const unsigned char*>(b);
  for (; *p != '\0' && *p == *q; ++p, ++q) {
  }
  return *p == *q ? 0 : *p < *q ? -1 : 1;
}

LDSCOPE_HIDDEN int strncmp(const char* a, const char* b, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(a);
  const auto* q = reinterpret_cast<const unsigned char*>(b);
  for (; n > 0; --n, ++p, ++q) {
    if (*p != *q) return *p < *q ? -1 : 1;
    if (*p == '\0') return 0;
  }
  return 0;
}

LDSCOPE_HIDDEN char* strchr(const char* s, int c) {
  for (;; ++s) {
    if (*s == static_cast<char>(c)) return const_cast<char*>(s);
    if (*s == '\0') return nullptr;
  }
}

LDSCOPE_HIDDEN char* strrchr(const char* s, int c) {
  const char* last = nullptr;
  for (;; ++s) {
    if (*s == static_cast<char>(c)) last = s;
    if (*s == '\0') return const_cast<char*>(last);
  }
}
