// frontend/allocator.h — the per-thread allocator and its fast paths.
//
// Owns: an allocator's size-class free lists, its slabs (active, available, spare;
// sleeping slabs are on no list and are found again by the frees that wake
// them), its cache of empty chunks, its remote-free inbox, and its counters.
// The fast paths (allocate from a class list, free into an owned slab) are
// inline here; everything else is a noinline slow path in allocator.cc.
// Must never: take a lock, make a syscall or do an atomic read-modify-write
// on a fast path; touch another allocator's slabs.
#pragma once

#include <atomic>

#include "backend/chunk_meta.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/dlist.h"
#include "ds/freelist.h"
#include "ds/mpsc_queue.h"
#include "ds/sizeclass.h"
#include "ds/slab_batch.h"
#include "frontend/outbox.h"
#include "frontend/remote_cache.h"

namespace roost {

class Allocator {
 public:
  // ---- hot: touched by every malloc and free ----
  FreeObject* fast_[sizeclass::kCount];  // objects ready to hand out, per class
  uint64_t allocs_[sizeclass::kCount];   // small allocations served, per class
  uint64_t frees_[sizeclass::kCount];    // small frees done by this thread, per class

  // ---- slow-path state ----
  ChunkMeta* active_[sizeclass::kCount];           // slab whose bump tail is being carved
  DList<ChunkMeta> available_[sizeclass::kCount];  // woken slabs with free objects
  ChunkMeta* spare_[sizeclass::kCount];  // an emptied slab kept on the available list, or null
  size_t spare_bytes_;  // their chunks' bytes (with the cache's, within the reserve)
  DList<ChunkMeta> chunk_cache_[config::kRegionBits + 1];  // empty chunks kept, by order
  size_t chunk_cache_bytes_;
  size_t chunk_cache_resident_;  // of which in their chunks' dirty extents
  // Message passing: objects other allocators freed, sent home here, and
  // objects this allocator freed for others, collected by slab (BatchIt)
  // and waiting to be posted.
  MpscQueue inbox_;
  Outbox outbox_;
  RemoteCache remote_cache_;
  size_t outbox_limit_;             // ROOST_OUTBOX_BYTES, cached at bind
  bool batchit_;                    // ROOST_BATCHIT, cached at bind
  bool draining_;                   // inside drain_inbox
  uint64_t remote_frees_;           // others' objects freed here (sent: these + forwarded)
  uint64_t batches_sent_;           // inbox enqueues
  uint64_t slab_batches_sent_;      // batch messages posted, forwarded ones included
  uint64_t batchit_evictions_;      // batches evicted from the cache to make room
  uint64_t messages_received_;      // objects
  uint64_t slab_batches_received_;  // batch messages
  uint64_t messages_forwarded_;     // objects
  uint64_t inbox_drains_;
  uint64_t slabs_;          // slabs currently owned
  uint32_t id_;             // dense id, recycled with the allocator
  Allocator* next_all_;     // every allocator ever made, for statistics
  Allocator* next_pooled_;  // pooled allocators not bound to a thread

  // Allocation fast path for a small class.
  ROOST_INLINE void* alloc_small(unsigned sc) {
    FreeObject* p = fast_[sc];
    if (ROOST_LIKELY(p != nullptr)) {
      fast_[sc] = p->next;
      allocs_[sc]++;
      return p;
    }
    return alloc_refill(&fast_[sc]);
  }

  // Free fast path for an object in a slab this allocator owns; `m` is its
  // chunk record, already known to be owned by this allocator.
  ROOST_INLINE void free_local(ChunkMeta* m, void* p) {
    frees_[m->sizeclass]++;
    return_to_slab(m, p);
  }

  // Puts `p` back on its slab's free list (uncounted: the freeing thread
  // counted it).  `needed` is positive whenever an object of the slab is
  // out, so one free brings it at most to zero.
  ROOST_INLINE void return_to_slab(ChunkMeta* m, void* p) {
    freelist::push(m->free_head, p);
    if (ROOST_UNLIKELY(--m->needed == 0)) slab_event(m);
  }

  // Splices a batch of objects of slab `m` into its free list: constant
  // time whatever the batch holds; it may overshoot `needed` below zero.
  ROOST_INLINE void return_batch_to_slab(ChunkMeta* m, const slab_batch::Batch& b) {
    m->free_head = slab_batch::splice(b, m->free_head);
    m->needed -= static_cast<int32_t>(b.count);
    if (ROOST_UNLIKELY(m->needed <= 0)) slab_event(m);
  }

  // Slow paths.
  // `slot` is &fast_[sc] of the calling thread's allocator (passing it keeps
  // the fast path free of register copies).
  ROOST_NOINLINE static void* alloc_refill(FreeObject** slot);
  // Allocation from an allocator borrowed by a thread past its exit hook.
  void* alloc_borrowed(unsigned sc);
  ROOST_NOINLINE void slab_event(ChunkMeta* m);
  // Frees `p`, an object of slab `m` that another allocator owns (counted
  // here): files it in the outbox (through the BatchIt cache), posting the
  // outbox, and visiting the inbox, when it is full.  Inline is the
  // cache's same-slab shortcut, which most frees of a run take; the rest
  // is free_remote_slow().
  ROOST_INLINE void free_remote(ChunkMeta* m, void* p) {
    frees_[m->sizeclass]++;
    remote_frees_++;
    if (config::kBatchIt && ROOST_LIKELY(remote_cache_.add_to_last(m, p))) {
      charge_outbox(m->obj_size);
      return;
    }
    free_remote_slow(m, p);
  }
  // The cache's bytes count against the outbox's room like the outbox's.
  // The outbox is full when the room would go below zero: one subtract,
  // and a branch on its borrow.
  ROOST_INLINE void charge_outbox(uint32_t bytes) {
    if (ROOST_UNLIKELY(__builtin_sub_overflow(outbox_.room, bytes, &outbox_.room)))
      post_and_visit();
  }
  ROOST_NOINLINE void free_remote_slow(ChunkMeta* m, void* p);
  // For a thread without an allocator (past its exit hook): posts `p` to
  // its owner's inbox alone.
  static void send_alone(ChunkMeta* m, void* p);
  // Posts the remote cache's batches and every outbox bucket (forwarding
  // rounds included).
  void flush_outbox();
  // The outbox is full: posts it, and visits the inbox (so a thread that
  // only frees others' objects still takes its own back).
  ROOST_NOINLINE void post_and_visit();
  // Takes messages from the inbox: at most kInboxBudget, or all of them
  // (until the inbox reads empty) when `all`.
  void drain_inbox(bool all);
  // Everything pending, in and out (thread exit, trim).
  void settle();

  // Returns empty chunks beyond `keep` bytes to the backend; true if any.
  bool trim_chunk_cache(size_t keep);
  // Lets go of everything not in use: the fast lists' objects go back to
  // their slabs, no class keeps an active slab, and every empty slab and
  // cached chunk goes back to the backend (thread exit, trim).  True if
  // anything went back.
  bool release_unused();

 private:
  void* refill(unsigned sc);
  // Files a message for the allocator `dest` under the bucket its id selects
  // at `shift`.
  void file_message(Allocator* dest, QueueNode* node, unsigned shift);
  // Seals a batch of objects of slab `m` and files it for the slab's owner.
  void post_batch(ChunkMeta* m, FreeObject* head, FreeObject* tail, uint32_t count);
  ROOST_NOINLINE void* refill_from_other_slab(unsigned sc);
  void take(ChunkMeta* m, unsigned sc);
  void update_slab_state(ChunkMeta* m);
  ROOST_INLINE void* pop_fast(unsigned sc) {
    FreeObject* p = fast_[sc];
    fast_[sc] = p->next;
    allocs_[sc]++;
    return p;
  }
  // Makes `m` (a chunk just taken) the active slab of class `sc`.
  void start_slab(ChunkMeta* m, unsigned sc);
  // Would the next carve of `m` reach pages never touched (or purged)?
  bool carve_touches_fresh(const ChunkMeta* m, unsigned sc) const;
  // An empty chunk of 2^order bytes: cached ones with resident pages first,
  // then other cached ones, then the backend's (recently released first).
  ChunkMeta* take_chunk(unsigned order);
  // A cached chunk of at least `order` (with resident pages, if asked),
  // split down to it; the rest stays cached.
  ChunkMeta* take_cached(unsigned order, bool resident_only);
  void cache_chunk(ChunkMeta* m);
  // Takes `m` off the cache's list and counts (cache_chunk undone).
  void uncache_chunk(ChunkMeta* m);
  void keep_chunk(ChunkMeta* m);
  // Bytes of empty memory this allocator keeps resident, against the
  // reserve: cached chunks' dirty extents and spares.  (Untouched cached
  // pieces cost address space only: counting them sent emptied slabs to the
  // backend while the pieces held the reserve.)
  size_t kept_bytes() const { return chunk_cache_resident_ + spare_bytes_; }
  // Class `sc`'s spare is no longer one (taken for use, or released).
  void forget_spare(unsigned sc) {
    spare_[sc] = nullptr;
    spare_bytes_ -= sizeclass::slab_size(sc);
  }
  void release_slab(ChunkMeta* m);
  void carve(ChunkMeta* m, unsigned sc);
};

ROOST_INLINE bool is_object_start(const ChunkMeta* m, const void* p);

// Frees that wake a sleeping slab: the class's wake threshold, or every
// object carved so far when fewer are out (a slab carved a few big objects
// at a time must still wake, and go back when they all return).
ROOST_INLINE uint32_t wake_count(const ChunkMeta* m) {
  uint32_t wake = sizeclass::kInfo.info[m->sizeclass].wake;
  return m->carved < wake ? m->carved : wake;
}

// The free fast path checks 16-byte alignment (inside
// pagemap::lookup_aligned); the exact test (below) costs a multiply chain,
// so the fast path adds it only in checked builds.  Every slow path uses it.
ROOST_INLINE bool exact_start_if_checked(const ChunkMeta* m, const void* p) {
  if constexpr (config::kCheckedFree) return is_object_start(m, p);
  return true;
}

// Is `p` the start of an object of the slab `m`?  Division-free: the index
// is a multiply by the class's reciprocal and a shift.
ROOST_INLINE bool is_object_start(const ChunkMeta* m, const void* p) {
  uintptr_t off = reinterpret_cast<uintptr_t>(p) - m->base;
  uintptr_t index = (off * m->recip) >> sizeclass::kRecipShift;
  return index * m->obj_size == off;
}

}  // namespace roost
