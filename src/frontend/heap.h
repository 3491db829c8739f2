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

ROOST_INLINE void dealloc(void* p, const char* where) {
  uintptr_t index = pagemap::aligned_index(p);
  Allocator* a = pool::current();
  if (ROOST_LIKELY(pagemap::in_table(index))) {
    // Never null: memory roost does not own has the stray record, which no
    // allocator owns.
    ChunkMeta* m = pagemap::record_at(index);
    if constexpr (config::kDetectDoubleFree) {
      // Only an exact object start of a slab carries a mark; the slow path
      // names whatever else this is.  The thread's own object first: an
      // allocator owns slabs alone, so its record needs no kind test (the
      // hardened build's quarantine takes the path below).
      if (!config::kQuarantine && ROOST_LIKELY(owned_by(m, a))) {
        if (ROOST_UNLIKELY(!slab::is_aligned_object_start(m, p) || !slab::is_carved(m, p))) {
          dealloc_slow(p, m, a, where);
          return;
        }
        // (note_small_free()'s own test folds into this one.)
        if (ROOST_UNLIKELY(free_mark::is_set(p, m))) {
          checks::freed_twice(p, m, where);
          return;
        }
        checks::note_small_free(m, p, where);
        a->free_owned(m, p);
        return;
      }
      if (ROOST_UNLIKELY(m->kind != ChunkKind::kSlab || !slab::is_aligned_object_start(m, p) ||
                         !slab::is_carved(m, p))) {
        dealloc_slow(p, m, a, where);
        return;
      }
      checks::note_small_free(m, p, where);
      if constexpr (config::kQuarantine) {
        // (A thread without an allocator has no quarantine.)
        if (ROOST_LIKELY(!pool::is_unbound(a))) {
          void* out = a->quarantine(m, p);
          if (out == nullptr) return;
          if (out != p) {
            p = out;
            m = pagemap::record_at(pagemap::aligned_index(p));
            a->left_quarantine(m, p, where);
          }
        }
      }
    }
    if (ROOST_LIKELY(a->try_free_local(m, p, where))) return;
    if (ROOST_LIKELY(a->try_free_remote(m, p, where))) return;
    dealloc_slow(p, m, a, where);
    return;
  }
  dealloc_unmapped(p, a, where);
}

// free_sized, free_aligned_sized, sized delete: `size` and `align` (0 when
// none was given) are what the caller says it allocated `p` with, checked
// by the secure build.
ROOST_INLINE void dealloc_sized(void* p, size_t size, size_t align, const char* where) {
  if constexpr (config::kCheckSizedFree) {
    if (p != nullptr) checks::sized_free(p, size, align, where);
  }
  dealloc(p, where);
}

// `align` is a power of two; any size.  nullptr + ENOMEM on failure.
void* alloc_aligned(size_t align, size_t size);
// Zeroed memory; memory fresh from the OS is not written again.
void* alloc_zeroed(size_t size);
// Usable bytes of a live object; 0 for nullptr; misuse is fatal.
size_t usable_size(const void* p, const char* where);
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
