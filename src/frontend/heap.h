// frontend/heap.h — what the API layer calls: allocate, free, size, resize.
//
// Owns: the inline fast paths of malloc and free (class lookup, thread
// allocator, owner test) and the entry points of their slow paths (large
// objects, remote frees, misuse).  Must never: know the C or C++ API's edge
// rules (errno choices, alignment validation); that is api/.
#pragma once

#include "backend/pagemap.h"
#include "frontend/allocator_pool.h"
#include "frontend/checks.h"
#include "frontend/pointer.h"

namespace roost::heap {

// Slow paths (heap.cc).
ROOST_NOINLINE void* alloc_large(size_t size, size_t align, bool zero);
// A zero-size allocation aligned to `align` (secure build: an address that
// faults on access; else, or when that cannot be had, an object as for one
// byte).
ROOST_NOINLINE void* alloc_zero_size(size_t align);
// A free the fast path did not take: `m` is its record (the stray record
// where roost owns nothing: see pagemap.h), `a` the calling thread's
// allocator.  The usual case is another allocator's object, which goes
// straight to the remote-free path.
ROOST_NOINLINE void dealloc_slow(void* p, ChunkMeta* m, Allocator* a, const char* where);
// A free of a pointer the aligned lookup did not find: null, misaligned
// (looked up again to tell an interior pointer) or foreign (beyond the
// table, or the stray record's).
ROOST_NOINLINE void dealloc_unmapped(void* p, Allocator* a, const char* where);

// The hardened build's small objects: the class of `size` and a canary
// word, the canary written (ds/slack_canary.h).
ROOST_INLINE void* alloc_with_canary(unsigned sc, size_t size) {
  void* p = pool::current()->alloc(sc);
  if (ROOST_LIKELY(p != nullptr)) slack_canary::write(p, size, sizeclass::kInfo.info[sc].size);
  return p;
}

ROOST_INLINE void* alloc(size_t size) {
  if constexpr (config::kSlackCanaries) {
    if constexpr (config::kZeroSizeFaults) {
      if (ROOST_UNLIKELY(size == 0)) return alloc_zero_size(config::kMinAlloc);
    }
    if (ROOST_LIKELY(size <= config::kMaxSmall - config::kSlackCanaryBytes))
      return alloc_with_canary(sizeclass::from_size(size + config::kSlackCanaryBytes), size);
    return alloc_large(size, 1, false);
  }
  // (Size 0 too, where it faults: Allocator::alloc_small.)
  if (ROOST_LIKELY(size <= config::kTableClassified)) return pool::current()->alloc_small(size);
  if (ROOST_LIKELY(size <= config::kMaxSmall))
    return pool::current()->alloc(sizeclass::from_size_clz(size));
  return alloc_large(size, 1, false);
}

// The hardened build's first level of a free: `p`, an object start of slab
// `m` that the slab carved, freed by a thread with an allocator `a`, is
// marked (its checks) and waits in the quarantine; the object that leaves
// it goes home.
ROOST_INLINE void free_quarantined(void* p, ChunkMeta* m, Allocator* a, const char* where) {
  if (ROOST_UNLIKELY(!checks::mark_freed(m, p, where))) {
    a->free_found_marked(m, p, where);
    return;
  }
  void* out = a->quarantine(m, p);
  if (out == nullptr) return;
  if (out != p) {
    p = out;
    m = pagemap::record_at(pagemap::aligned_index(p));
    a->left_quarantine(m, p, where);
  }
  a->free_marked(m, p);
}

// free: the pagemap's lookup, then the levels that may take the pointer,
// each with its checks (the free mark's: checks::mark_freed): the thread's
// own object (Allocator::try_free_local), another allocator's joining the
// lane of its slab (try_free_remote), or in the hardened build the
// quarantine (free_quarantined), then the slow path, which names what is
// not an object start the slab carved.
ROOST_INLINE void dealloc(void* p, const char* where) {
  uintptr_t index = pagemap::aligned_index(p);
  Allocator* a = pool::current();
  if (ROOST_UNLIKELY(!pagemap::in_table(index))) {
    dealloc_unmapped(p, a, where);
    return;
  }
  // Never null: memory roost does not own has the stray record, which no
  // allocator owns.
  ChunkMeta* m = pagemap::record_at(index);
  if constexpr (config::kQuarantine) {
    // The quarantine's level takes the place of the two below.  (A thread
    // without an allocator has no quarantine: the slow path.)
    if (ROOST_LIKELY(!pool::is_unbound(a) && slab::is_carved_object(m, p)))
      free_quarantined(p, m, a, where);
    else
      dealloc_slow(p, m, a, where);
    return;
  }
  if (ROOST_LIKELY(a->try_free_local(m, p, where))) return;
  if (ROOST_LIKELY(a->try_free_remote(m, p, where))) return;
  dealloc_slow(p, m, a, where);
}

// free_sized, free_aligned_sized, sized delete: `size` and `align` (0 when
// none was given) are what the caller says it allocated `p` with, checked
// by the secure build.
ROOST_INLINE void dealloc_sized(void* p, size_t size, size_t align, const char* where) {
  if constexpr (config::kCheckSizedFree) {
    if (p != nullptr) pointer::check_sized_free(p, size, align, where);
  }
  dealloc(p, where);
}

// `align` is a power of two; any size.  nullptr + ENOMEM on failure.
void* alloc_aligned(size_t align, size_t size);
// Zeroed memory; memory fresh from the OS is not written again.
void* alloc_zeroed(size_t size);
// Usable bytes of a live object; 0 for nullptr; misuse is fatal, its fault
// named.  Every kind of pointer (heap.cc).
ROOST_NOINLINE size_t usable_size_slow(const void* p, const char* where);
// The same, with malloc_usable_size's fast path (a program may ask it at
// every malloc and free, as Redis does to count its memory): free's lookup
// and tests, then a slab object's size.  Anything else (null, a large,
// sampled or zero-size object, misuse, the hardened build's canary check)
// takes the slow path.
ROOST_INLINE size_t usable_size(const void* p, const char* where) {
  if constexpr (!config::kSlackCanaries) {
    uintptr_t index = pagemap::aligned_index(p);
    if (ROOST_LIKELY(pagemap::in_table(index))) {
      const ChunkMeta* m = pagemap::record_at(index);
      if (ROOST_LIKELY(slab::is_carved_object(m, p))) return m->obj_size;
    }
  }
  return usable_size_slow(p, where);
}
// glibc realloc minus the p == nullptr / size == 0 cases (api/ handles those).
void* resize(void* p, size_t size);
// Returns cached memory to the OS; true if any was released.
bool trim();
// Calls of trim() so far (statistics: the timeline's trims).
uint64_t trims();

// Frees of class `sc` by threads past their exit hook (statistics), which
// have no allocator to count them.
uint64_t unbound_frees(unsigned sc);

}  // namespace roost::heap
