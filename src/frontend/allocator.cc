// frontend/allocator.cc — the allocator's slow paths: refilling a size
// class, slab state changes, the chunk cache.  (Frees between allocators:
// frontend/message_passing.cc.)
//
// Slab life: a new slab is carved from its bump tail a page at a time into
// the class's fast list.  Handing a slab's free objects to the fast list
// puts it to sleep: it is on no list, and `needed` counts the frees that wake
// it (the class's wake threshold).  Woken, it joins the available list and
// `needed` counts the frees until it is empty; empty, it stays as the
// class's spare (one per class, within the reserve) or its chunk goes to the
// chunk cache, where any size class can reuse it.  Every step is O(1).
#include "frontend/allocator.h"

#include <cerrno>

#include "backend/chunk_allocator.h"
#include "frontend/allocator_pool.h"
#include "options.h"

namespace roost {

namespace {
// Take 512 KiB from the backend at a time (the default reserve's size), so
// most slabs cost no lock.
constexpr unsigned kBatchOrder = 19;
}  // namespace

void* Allocator::alloc_refill(FreeObject** slot) {
  // Only the fast path calls this, always on the thread's own allocator.
  Allocator* a = pool::current();
  return a->refill(static_cast<unsigned>(slot - a->fast_));
}

void* Allocator::alloc_borrowed(unsigned sc) {
  if (fast_[sc] == nullptr) return refill(sc);
  return pop_fast(sc);
}

void* Allocator::refill(unsigned sc) {
  if (ROOST_UNLIKELY(this == &pool::g_unbound)) return pool::alloc_unbound(sc);
  if (inbox_.maybe_nonempty()) drain_inbox(false);
  // The common case: the class's active slab got objects back.
  ChunkMeta* m = active_[sc];
  if (ROOST_LIKELY(m != nullptr && m->free_head != nullptr)) {
    take(m, sc);
    return pop_fast(sc);
  }
  return refill_from_other_slab(sc);
}

void* Allocator::refill_from_other_slab(unsigned sc) {
  // The active slab has no free objects, so it is asleep (an awake slab
  // holds free objects until taken): switching away strands nothing.
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  ChunkMeta* m;
  for (unsigned round = 0;; round++) {
    m = available_[sc].pop_front();
    if (m != nullptr) {
      if (m == spare_[sc]) forget_spare(sc);
      active_[sc] = m;
      take(m, sc);
      return pop_fast(sc);
    }
    // Objects freed elsewhere may still wait in the inbox: fresh memory
    // (which grows the footprint) only once it reads empty, or after a
    // bounded number of further visits.
    if (round == config::kInboxVisitsBeforeFreshMemory || !inbox_.maybe_nonempty()) break;
    drain_inbox(false);
    m = active_[sc];
    if (m != nullptr && m->free_head != nullptr) {
      take(m, sc);
      return pop_fast(sc);
    }
  }
  m = active_[sc];
  if (m == nullptr || m->carved == info.capacity) {
    m = take_chunk(info.slab_bits);
    if (m == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    m->owner = this;
    m->free_head = nullptr;
    m->sizeclass = static_cast<uint8_t>(sc);
    set_kind(m, ChunkKind::kSlab);
    m->state = SlabState::kSleeping;
    m->needed = 0;  // nothing carved yet: carve() sets the wake count
    m->recip = info.recip;
    m->obj_size = info.size;
    m->carved = 0;
    pagemap::set_range(m->base, sizeclass::slab_size(sc), m);
    slabs_++;
    active_[sc] = m;
  }
  carve(m, sc);
  return pop_fast(sc);
}

void Allocator::take(ChunkMeta* m, unsigned sc) {
  // All the slab's free objects move to the fast list; every carved object
  // is now out, and the slab sleeps until wake_count() of them come back.
  fast_[sc] = m->free_head;
  m->free_head = nullptr;
  m->state = SlabState::kSleeping;
  m->needed = static_cast<int32_t>(wake_count(m));
}

void Allocator::carve(ChunkMeta* m, unsigned sc) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  uint32_t left = info.capacity - m->carved;
  uint32_t count = info.carve < left ? info.carve : left;
  uintptr_t first = m->base + static_cast<uintptr_t>(m->carved) * info.size;
  fast_[sc] = freelist::build(first, info.size, count, fast_[sc]);
  // Only an asleep slab is carved (see refill_from_other_slab).  Its wake
  // count may grow with the objects out: `needed` grows by as much.
  uint32_t before = wake_count(m);
  m->carved += count;
  m->needed += static_cast<int32_t>(wake_count(m) - before);
}

void Allocator::slab_event(ChunkMeta* m) {
  update_slab_state(m);
  // A local free lands here once per `wake` frees into a slab, so a thread
  // that only frees its own objects still visits its inbox now and then.
  if (!draining_ && inbox_.maybe_nonempty()) drain_inbox(false);
}

void Allocator::update_slab_state(ChunkMeta* m) {
  unsigned sc = m->sizeclass;
  // The active slab is never on the available list: refill looks at it
  // first.  Every other awake slab is.
  bool active = m == active_[sc];
  if (m->state == SlabState::kSleeping) {
    // A batch may have brought more than the wake count: `needed` is then
    // below zero by the surplus.
    uint32_t returned = wake_count(m) + static_cast<uint32_t>(-m->needed);
    uint32_t in_use = m->carved - returned;
    m->state = SlabState::kAvailable;
    m->needed = static_cast<int32_t>(in_use);
    if (!active) available_[sc].push_front(m);
    if (in_use != 0) return;
  }
  // Empty.  The active slab stays (`needed` 0: no free can reach it before
  // it is taken again), so a class that empties and refills its slab does
  // not thrash through the backend.
  if (active) return;
  // Each class may keep one emptied slab, within the reserve: it stays on
  // the available list and is refilled before the active slab's untouched
  // tail is carved, so a class that empties and refills slabs (a FIFO
  // producer) reuses resident memory instead of touching fresh pages while
  // its released slabs wait in the backend.
  size_t bytes = sizeclass::slab_size(sc);
  if (spare_[sc] == nullptr && kept_bytes() + bytes <= options::get(options::kSlabReserveBytes)) {
    spare_[sc] = m;
    spare_bytes_ += bytes;
    return;
  }
  available_[sc].remove(m);
  release_slab(m);
}

void Allocator::release_slab(ChunkMeta* m) {
  unsigned sc = m->sizeclass;
  if (active_[sc] == m) active_[sc] = nullptr;
  pagemap::set_range(m->base, sizeclass::slab_size(sc), nullptr);
  slabs_--;
  m->owner = nullptr;
  m->free_head = nullptr;
  keep_chunk(m);
}

void Allocator::keep_chunk(ChunkMeta* m) {
  size_t bytes = size_t{1} << m->order;
  if (kept_bytes() + bytes <= options::get(options::kSlabReserveBytes)) {
    set_kind(m, ChunkKind::kCached);
    chunk_cache_[m->order].push_front(m);
    chunk_cache_bytes_ += bytes;
    return;
  }
  chunks::release(m, bytes);
}

ChunkMeta* Allocator::take_chunk(unsigned order) {
  auto keep_clean = [this](ChunkMeta* piece) {
    set_kind(piece, ChunkKind::kCached);
    chunk_cache_[piece->order].push_front(piece);
    chunk_cache_bytes_ += size_t{1} << piece->order;
  };
  for (unsigned j = order; j <= config::kRegionBits; j++) {
    ChunkMeta* m = chunk_cache_[j].pop_front();
    if (m == nullptr) continue;
    chunk_cache_bytes_ -= size_t{1} << j;
    chunks::split_out(m, order, keep_clean);
    return m;
  }
  // Nothing cached is big enough.  Memory that exited threads' objects hold
  // may be waiting in a pooled allocator's inbox: deliver some first.
  pool::help_pooled();
  // What is cached goes back to the backend, where it merges with its
  // released buddies and can serve this request (the reserve is for reuse,
  // not for holding pieces too small to use).
  trim_chunk_cache(0);
  // Then released memory that can serve this order, resident already; else
  // a batch when the reserve has room for the rest, so most slabs cost no
  // lock.
  unsigned take = order;
  if (order < kBatchOrder && !chunks::has_dirty(order) &&
      kept_bytes() + (size_t{1} << kBatchOrder) <= options::get(options::kSlabReserveBytes))
    take = kBatchOrder;
  ChunkMeta* m = chunks::alloc(take);
  if (m == nullptr) return nullptr;
  chunks::split_out(m, order, keep_clean);
  return m;
}

bool Allocator::release_unused() {
  uint64_t slabs_before = slabs_;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    // No class keeps an active slab: an awake one (on no list while active)
    // goes to the available list, or back to the chunks if it is empty...
    ChunkMeta* active = active_[sc];
    active_[sc] = nullptr;
    if (active != nullptr && active->state == SlabState::kAvailable) {
      if (active->needed == 0)
        release_slab(active);
      else
        available_[sc].push_front(active);
    }
    // ...and the objects on the fast list go back to their slabs (not
    // counted as frees: they were never handed out), which releases every
    // slab that has nothing else out.
    FreeObject* list = fast_[sc];
    fast_[sc] = nullptr;
    while (list != nullptr) {
      FreeObject* next = list->next;
      return_to_slab(pagemap::lookup(list), list);
      list = next;
    }
    // ...and the class's spare (perhaps just emptied by the above) too.
    if (ChunkMeta* spare = spare_[sc]) {
      forget_spare(sc);
      available_[sc].remove(spare);
      release_slab(spare);
    }
  }
  bool released = slabs_ < slabs_before;
  return trim_chunk_cache(0) || released;
}

bool Allocator::trim_chunk_cache(size_t keep) {
  bool released = false;
  for (unsigned j = 0; j <= config::kRegionBits && chunk_cache_bytes_ > keep; j++) {
    while (chunk_cache_bytes_ > keep) {
      ChunkMeta* m = chunk_cache_[j].pop_front();
      if (m == nullptr) break;
      size_t bytes = size_t{1} << j;
      chunk_cache_bytes_ -= bytes;
      chunks::release(m, bytes);
      released = true;
    }
  }
  return released;
}

}  // namespace roost
