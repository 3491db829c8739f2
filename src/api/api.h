// api/api.h — the C/POSIX/glibc malloc family's rules, over frontend/heap.h.
//
// Owns: edge behaviour as glibc has it: NULL + errno on failure, overflow
// checks, alignment validation, realloc's NULL/zero cases; and, in a
// ROOST_VALGRIND or ROOST_ASAN build, what valgrind's memcheck or
// AddressSanitizer is told of the blocks that cross to the program and
// back (below).  Both the overriding entry points (override_malloc.cc,
// override_new*.cc) and the prefixed ones (prefixed.cc) are thin names
// over these.
// Must never: hold allocator state; in any build but those two, add an
// instruction to heap::alloc and heap::dealloc (malloc and free).
#pragma once

#include <cerrno>
#include <cstdint>

#include "backend/large.h"
#include "frontend/heap.h"
#include "frontend/profile.h"
#include "platform/asan.h"
#include "platform/memcheck.h"
#include "platform/os.h"

#define ROOST_EXPORT extern "C" __attribute__((visibility("default")))
// The fast paths' entry points start on a 512-byte boundary, so where they
// fall does not move with unrelated code, and none shorter than that (the
// default and secure builds' all are) runs across a 4 KiB page, which would
// change its timing from one build to the next (docs/DESIGN.md, "Following
// malloc and free").
#define ROOST_HOT_ENTRY __attribute__((aligned(512)))

namespace roost::api {

// What valgrind's memcheck (a ROOST_VALGRIND build, platform/memcheck.h)
// and AddressSanitizer (a ROOST_ASAN build, platform/asan.h) are told; in
// any other build each function here is the plain heap:: call.  Every
// entry point runs roost's own code quiet (memcheck::Quiet), and tells
// them of the block it hands out, with its usable size; a free tells them
// first, so that the program's free of a block it already freed is
// memcheck's "invalid free" at the program's line, and so that no other
// thread can be handed the object while they still count it as the old
// block.
inline constexpr bool kTold = memcheck::kOn || asan::kOn;

// `p`, roost's result (maybe null), becomes a block of the program, or one
// of roost's own (allocated inside roost: glibc's for roost's thread),
// which memcheck is to find reachable (memcheck::keep_reachable).  Called
// quiet.
ROOST_INLINE void* handed_out(void* p, bool zeroed = false) {
  if (p == nullptr) return p;
  size_t usable = heap::usable_size(p, "malloc");
  memcheck::allocated(p, usable, zeroed);
  asan::unpoison(p, usable);
  if (!profile::may_sample()) memcheck::keep_reachable(p);
  return p;
}

// The usable size of the block `p` starts, as roost's records tell it; 0
// where `p` starts none (roost's free then says what it is).
inline size_t block_size(const void* p) {
  ChunkMeta* m = pagemap::lookup(p);
  if (m == nullptr) return 0;
  if (m->kind == ChunkKind::kSlab) return slab::is_object_start(m, p) ? m->obj_size : 0;
  if (m->kind == ChunkKind::kLarge || m->kind == ChunkKind::kHuge)
    return reinterpret_cast<uintptr_t>(p) == m->base ? large::usable(m) : 0;
  return 0;
}

// Whether `p` (not null) is not roost's but a block of ASan's own
// allocator: ASan's strdup, getline, asprintf & co. allocate with it, also
// in a program whose malloc is roost's (ASan build only).
ROOST_INLINE bool asan_block(const void* p) {
  if constexpr (asan::kOn) return block_size(p) == 0 && asan::owns(p);
  return false;
}

// `p` (not null), which the program frees, is a block no more.
ROOST_INLINE void taken_back(void* p) {
  memcheck::freed(p);
  memcheck::forget(p);
  if constexpr (asan::kOn) asan::poison(p, block_size(p));
}

// Until ASan's shadow memory is mapped (ld.so allocates while ASan starts
// up, and roost serves it), nothing can be poisoned: a block is then a
// large object, pages of its own, so that no slab starts unpoisoned (its
// objects not handed out yet would stay open to the program's overflows).
ROOST_INLINE bool before_asan() {
  if constexpr (asan::kOn) return asan::starting();
  return false;
}

ROOST_INLINE void* malloc(size_t size) {
  if constexpr (kTold) {
    memcheck::Quiet quiet;
    if (before_asan()) return handed_out(heap::alloc_large(size, 1, false));
    return handed_out(heap::alloc(size));
  }
  return heap::alloc(size);
}

// `align` is a power of two.
ROOST_INLINE void* aligned(size_t align, size_t size) {
  if constexpr (kTold) {
    memcheck::Quiet quiet;
    if (before_asan()) return handed_out(heap::alloc_large(size, align, false));
    return handed_out(heap::alloc_aligned(align, size));
  }
  return heap::alloc_aligned(align, size);
}

ROOST_INLINE void free(void* p, const char* where) {
  if constexpr (kTold) {
    if (p != nullptr && asan_block(p)) return asan::free_own(p);
    if (p != nullptr) taken_back(p);
    memcheck::Quiet quiet;
    heap::dealloc(p, where);
  } else {
    heap::dealloc(p, where);
  }
}

// free_sized, free_aligned_sized, sized delete (heap::dealloc_sized).
ROOST_INLINE void free_sized(void* p, size_t size, size_t align, const char* where) {
  if constexpr (kTold) {
    if (p != nullptr && asan_block(p)) return asan::free_own(p);
    if (p != nullptr) taken_back(p);
    memcheck::Quiet quiet;
    heap::dealloc_sized(p, size, align, where);
  } else {
    heap::dealloc_sized(p, size, align, where);
  }
}

inline size_t usable(const void* p, const char* where) {
  if (p != nullptr && asan_block(p)) return asan::size_of_own(p);
  if constexpr (memcheck::kOn) {
    memcheck::Quiet quiet;
    return heap::usable_size(p, where);
  }
  return heap::usable_size(p, where);
}

inline void* calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  if constexpr (asan::kOn) {
    // (heap::alloc_zeroed's memset, ASan's, would find the object poisoned.)
    void* p = malloc(bytes);
    if (p != nullptr) __builtin_memset(p, 0, bytes);
    return p;
  }
  if constexpr (memcheck::kOn) {
    memcheck::Quiet quiet;
    return handed_out(heap::alloc_zeroed(bytes), true);
  }
  return heap::alloc_zeroed(bytes);
}

// realloc under memcheck and ASan, as memcheck's own malloc does it: a new
// block, the bytes copied by the program's view (their definedness with
// them), then the old block freed.  (heap::resize's copy runs quiet, on an
// object memcheck does not know yet, whose bytes would read as undefined,
// and through ASan's memcpy, which would find it poisoned.)
inline void* realloc_moving(void* p, size_t size) {
  size_t old = usable(p, "realloc");
  void* q = malloc(size);
  if (q == nullptr) return nullptr;
  __builtin_memcpy(q, p, old < size ? old : size);
  free(p, "realloc");
  return q;
}

inline void* realloc(void* p, size_t size) {
  if (p == nullptr) return malloc(size);
  if (size == 0) {  // glibc: frees and returns NULL
    free(p, "realloc");
    return nullptr;
  }
  if (size > config::kMaxRequest) {
    (void)usable(p, "realloc");  // still diagnose a bad pointer
    errno = ENOMEM;
    return nullptr;
  }
  if constexpr (kTold) return realloc_moving(p, size);
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
  return aligned(align, size);
}

// glibc: alignments that are not powers of two are rounded up.
inline void* memalign(size_t align, size_t size) {
  if (align <= config::kMinAlloc) return malloc(size);
  if (align > (SIZE_MAX >> 1) + 1) {
    errno = EINVAL;
    return nullptr;
  }
  return aligned(bits::next_pow2(align), size);
}

// POSIX: errors are returned, not put in errno; *out untouched on failure.
inline int posix_memalign(void** out, size_t align, size_t size) {
  if (!bits::is_pow2(align) || align % sizeof(void*) != 0) return EINVAL;
  int saved = errno;
  void* p = aligned(align, size);
  if (p == nullptr) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

// The OS's page, as glibc's valloc and pvalloc use it (os::page_size()).
inline void* valloc(size_t size) { return aligned(os::page_size(), size); }

inline void* pvalloc(size_t size) {
  const size_t page = os::page_size();
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t rounded = size == 0 ? page : bits::align_up(size, page);
  return aligned(page, rounded);
}

inline size_t usable_size(const void* p) { return usable(p, "malloc_usable_size"); }

inline int trim(size_t) {
  memcheck::Quiet quiet;  // (it settles the thread's allocator: messages)
  return heap::trim() ? 1 : 0;
}

}  // namespace roost::api
