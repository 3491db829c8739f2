// api/api.h — the C/POSIX/glibc malloc family's rules, over frontend/heap.h.
//
// Owns: edge behaviour as glibc has it: NULL + errno on failure, overflow
// checks, alignment validation, realloc's NULL/zero cases.  Both the
// overriding entry points (override_malloc.cc) and the prefixed ones
// (prefixed.cc) are thin names over these, and over heap::alloc and
// heap::dealloc for malloc and free, which have no edge rules of their own.
// Must never: hold allocator state.
#pragma once

#include <cerrno>
#include <cstdint>

#include "frontend/heap.h"
#include "platform/os.h"

#define ROOST_EXPORT extern "C" __attribute__((visibility("default")))
// The fast paths' entry points start on a 512-byte boundary, so where they
// fall does not move with unrelated code, and none shorter than that (the
// default and secure builds' all are) runs across a 4 KiB page, which would
// change its timing from one build to the next (docs/DESIGN.md, "Following
// malloc and free").
#define ROOST_HOT_ENTRY __attribute__((aligned(512)))

namespace roost::api {

inline void* calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return heap::alloc_zeroed(bytes);
}

inline void* realloc(void* p, size_t size) {
  if (p == nullptr) return heap::alloc(size);
  if (size == 0) {  // glibc: frees and returns NULL
    heap::dealloc(p, "realloc");
    return nullptr;
  }
  if (size > config::kMaxRequest) {
    (void)heap::usable_size(p, "realloc");  // still diagnose a bad pointer
    errno = ENOMEM;
    return nullptr;
  }
  return heap::resize(p, size);
}

inline void* reallocarray(void* p, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, bytes);
}

// C17 / glibc 2.38: the alignment must be a power of two.
inline void* aligned_alloc(size_t align, size_t size) {
  if (!bits::is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return heap::alloc_aligned(align, size);
}

// glibc: alignments that are not powers of two are rounded up.
inline void* memalign(size_t align, size_t size) {
  if (align <= config::kMinAlloc) return heap::alloc(size);
  if (align > (SIZE_MAX >> 1) + 1) {
    errno = EINVAL;
    return nullptr;
  }
  return heap::alloc_aligned(bits::next_pow2(align), size);
}

// POSIX: errors are returned, not put in errno; *out untouched on failure.
inline int posix_memalign(void** out, size_t align, size_t size) {
  if (!bits::is_pow2(align) || align % sizeof(void*) != 0) return EINVAL;
  int saved = errno;
  void* p = heap::alloc_aligned(align, size);
  if (p == nullptr) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

// The OS's page, as glibc's valloc and pvalloc use it (os::page_size()).
inline void* valloc(size_t size) { return heap::alloc_aligned(os::page_size(), size); }

inline void* pvalloc(size_t size) {
  const size_t page = os::page_size();
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t rounded = size == 0 ? page : bits::align_up(size, page);
  return heap::alloc_aligned(page, rounded);
}

inline size_t usable_size(const void* p) { return heap::usable_size(p, "malloc_usable_size"); }

inline int trim(size_t) { return heap::trim() ? 1 : 0; }

}  // namespace roost::api
