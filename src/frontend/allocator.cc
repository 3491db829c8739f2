// frontend/allocator.cc — the allocator's slow paths: refilling a size
// class, slab state changes, the chunk cache.  (Frees between allocators:
// frontend/message_passing.cc.)
//
// Slab life: a new slab is carved from its bump tail a page at a time into
// the class's fast list (pages a chunk's previous use left resident are
// carved before the class turns to other slabs, and before any untouched
// page while a cached chunk still has resident ones; see
// refill_from_other_slab).  Handing a slab's free objects to the fast list
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

// Objects the next carve of slab `m` takes from its tail: a carve's worth,
// or what is left.
uint32_t carve_count(const ChunkMeta* m, const sizeclass::ClassInfo& info) {
  uint32_t left = info.capacity - m->carved;
  return info.carve < left ? info.carve : left;
}
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
  // Resident pages in the active slab's tail first: a slab left with such a
  // tail would sleep on it while the class takes more memory.
  ChunkMeta* m = active_[sc];
  if (m != nullptr && m->carved < info.capacity && !carve_touches_fresh(m, sc)) {
    carve(m, sc);
    return pop_fast(sc);
  }
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
  // Carve the active slab's tail, unless that would touch pages never
  // written (or purged) while a cached chunk still has resident pages: a
  // slab on that chunk serves first, so the footprint does not grow while
  // released memory sits idle.  The old slab keeps its untouched tail
  // (address space only) and carves it when it is active again and nothing
  // resident is cached.  (Chunks released to the backend are left there:
  // taking them here, ahead of the old slab's tail, broke up the dirty
  // blocks that large objects reuse; measured, realloc's peak RSS grew from
  // 18 to 24-28 MiB.  take_chunk takes them only when it needs a chunk.)
  m = active_[sc];
  if (m == nullptr || m->carved == info.capacity) {
    m = take_chunk(info.slab_bits);
    if (m == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    start_slab(m, sc);
  } else if (carve_touches_fresh(m, sc)) {
    if (ChunkMeta* resident = take_cached(info.slab_bits, true)) {
      start_slab(resident, sc);
      m = resident;
    }
  }
  carve(m, sc);
  return pop_fast(sc);
}

void Allocator::start_slab(ChunkMeta* m, unsigned sc) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  // The chunk's dirty extent (read before `carved` overlays it) is what a
  // carve can use without touching fresh pages.
  uint32_t resident = m->dirty_pages;
  uint32_t pages = static_cast<uint32_t>(sizeclass::slab_size(sc) >> config::kPageBits);
  m->owner = this;
  m->free_head = nullptr;
  m->sizeclass = static_cast<uint8_t>(sc);
  set_kind(m, ChunkKind::kSlab);
  m->state = SlabState::kSleeping;
  m->needed = 0;  // nothing carved yet: carve() sets the wake count
  m->recip = info.recip;
  m->obj_size = info.size;
  m->carved = 0;
  if (resident > pages) resident = pages;
  m->touched_pages = static_cast<uint16_t>(resident);
  pagemap::set_range(m->base, sizeclass::slab_size(sc), m);
  slabs_++;
  active_[sc] = m;
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
  uint32_t count = carve_count(m, info);
  uintptr_t first = m->base + static_cast<uintptr_t>(m->carved) * info.size;
  fast_[sc] = freelist::build(first, info.size, count, fast_[sc]);
  // Only an asleep slab is carved (see refill_from_other_slab).  Its wake
  // count may grow with the objects out: `needed` grows by as much.
  uint32_t before = wake_count(m);
  m->carved = static_cast<uint16_t>(m->carved + count);
  m->needed += static_cast<int32_t>(wake_count(m) - before);
  uint32_t end = static_cast<uint32_t>(
      bits::align_up(size_t{m->carved} * info.size, config::kPageSize) >> config::kPageBits);
  if (end > m->touched_pages) m->touched_pages = static_cast<uint16_t>(end);
}

bool Allocator::carve_touches_fresh(const ChunkMeta* m, unsigned sc) const {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  uint32_t count = carve_count(m, info);
  size_t end = size_t{m->carved + count} * info.size;
  return end > size_t{m->touched_pages} << config::kPageBits;
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
  m->dirty_pages = m->touched_pages;  // overlays `carved`: read first
  keep_chunk(m);
}

void Allocator::keep_chunk(ChunkMeta* m) {
  // The reserve bounds resident bytes: an untouched chunk costs nothing to
  // keep.
  size_t bytes = dirty_extent(m);
  if (kept_bytes() + bytes <= options::get(options::kSlabReserveBytes)) {
    cache_chunk(m);
    return;
  }
  chunks::release(m, bytes);
}

void Allocator::cache_chunk(ChunkMeta* m) {
  set_kind(m, ChunkKind::kCached);
  chunk_cache_[m->order].push_front(m);
  chunk_cache_bytes_ += size_t{1} << m->order;
  chunk_cache_resident_ += dirty_extent(m);
}

void Allocator::uncache_chunk(ChunkMeta* m) {
  chunk_cache_[m->order].remove(m);
  chunk_cache_bytes_ -= size_t{1} << m->order;
  chunk_cache_resident_ -= dirty_extent(m);
}

ChunkMeta* Allocator::take_cached(unsigned order, bool resident_only) {
  for (unsigned j = order; j <= config::kRegionBits; j++) {
    for (ChunkMeta* m = chunk_cache_[j].head; m != nullptr; m = m->next) {
      if (resident_only && m->dirty_pages == 0) continue;
      uncache_chunk(m);
      chunks::split_out(m, order, [this](ChunkMeta* piece) { cache_chunk(piece); });
      return m;
    }
  }
  return nullptr;
}

ChunkMeta* Allocator::take_chunk(unsigned order) {
  // Resident memory first: cached chunks with resident pages, then chunks
  // released to the backend and not purged yet (split only from blocks up
  // to a batch's size: bigger ones are large objects', which reuse them
  // whole).  Then untouched cached chunks (pieces of a batch).
  if (ChunkMeta* m = take_cached(order, true)) return m;
  if (ChunkMeta* m = chunks::alloc_dirty(order, kBatchOrder)) return m;
  if (ChunkMeta* m = take_cached(order, false)) return m;
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
  chunks::split_out(m, order, [this](ChunkMeta* piece) { cache_chunk(piece); });
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
      ChunkMeta* m = chunk_cache_[j].head;
      if (m == nullptr) break;
      uncache_chunk(m);
      chunks::release(m, dirty_extent(m));
      released = true;
    }
  }
  return released;
}

}  // namespace roost
