// backend/residency.cc — implementation of backend/residency.h, and of the
// residency calls of backend/chunk_allocator.h (purge_all, purge_due,
// purge_delay_now_ns, has_dirty and the dirty counters).
//
// Owns: the residency policy of released chunks, the model of docs/DESIGN.md
// ("What stays resident"): every resident byte of the backend's is in use
// (in a chunk handed out), kept for a demand the program showed, or on its
// way out by a known time.  Released chunks sit in two generations of
// per-order lists.  Releases go to the young generation; every purge delay
// the young one becomes old, and the old one is purged (outside the lock)
// and merged into the buddy lists, but for as many bytes of its big chunks
// (config::kDemandKeptMinOrder and up) as the program took in big chunks
// during that delay: those stay old for another delay.  So a program that
// keeps cycling big buffers through the backend keeps about one delay's
// worth of that demand resident and does not fault it in again, while one
// that stops asking (or sleeps) has every dirty chunk purged within three
// delays of its last request.  The delay stretches while purges are undone
// (g_delay_shift).  Over its cap (dirty_cap(): the bytes handed out,
// config::kDirtyCapFloor at least), old chunks and then young ones, the
// biggest first, are purged at once down to
// config::kDirtyAfterCapQuarters quarters of the cap, whatever the clock
// says.  Of the dirty chunks, allocation takes the smallest that fits, the
// younger of two of a size (or the one whose extent fits best).  Who ages
// the generations: the next allocation or release that finds the delay
// passed, or the service thread (purge_due), which wakes when the delay has
// passed, so that memory is purged also while the program sleeps.  Huge
// pages are one more rule of the same model (backend/huge_pages.h): a purge
// first asks huge_pages::before_purge, and one that meets a collapse in
// progress leaves its chunk dirty for the next rotation (malloc_trim's
// waits the collapse out instead).
// Must never: purge under the backend's lock, take memory from the buddy
// lists or the fresh extent (backend/chunk_allocator.cc's), or hold a
// policy number of its own (src/config.h has them).
#include "backend/residency.h"

#include <atomic>

#include "backend/chunk_allocator.h"
#include "backend/chunk_internal.h"
#include "backend/huge_pages.h"
#include "ds/dlist.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::chunks {

namespace {

// A generation of dirty chunks, by order.
struct DirtyLists {
  DList<ChunkMeta> by_order[kMaxOrder + 1];
};

DirtyLists g_young, g_old;
uint8_t g_epoch = 0;        // counts rotations: young chunks carry it, old ones an earlier one
uint64_t g_rotated_ns = 0;  // when the young generation began
size_t g_taken = 0;         // bytes of big chunks handed out since then (the demand kept for)
size_t g_handouts = 0;      // chunks of any size handed out since then
// The purge delay (purge_delay_now_ns) is the option's, doubled
// g_delay_shift times.  A delay in which the program took memory that must
// be faulted in (clean chunks) amounting to a quarter or more of what was
// purged recently, and to a granule at least, doubles it (the program
// undid the purges), up to config::kMaxPurgeDelayShift times; a delay in
// which it took no chunk at all halves it; malloc_trim (purge_all) resets
// it.  Written under the lock; read without it by statistics (relaxed: a
// figure that orders nothing).
std::atomic<unsigned> g_delay_shift{0};
size_t g_purged_recently = 0;  // bytes purged, halved at each rotation
size_t g_taken_clean = 0;      // bytes of clean chunks handed out since the last rotation
// Counters written under the lock and read without it (relaxed: figures
// that order nothing).
std::atomic<size_t> g_dirty{0};                       // bytes in dirty extents
std::atomic<uint32_t> g_dirty_chunks[kMaxOrder + 1];  // per order, both generations
std::atomic<size_t> g_purged{0};

// Counts a chunk into (+1) or out of (-1) the dirty generations.
void count_dirty(const ChunkMeta* m, int sign) {
  g_dirty.fetch_add(static_cast<size_t>(sign) * dirty_extent(m), std::memory_order_relaxed);
  g_dirty_chunks[m->order].fetch_add(static_cast<uint32_t>(sign), std::memory_order_relaxed);
}

void push_dirty(ChunkMeta* m) {
  set_kind(m, ChunkKind::kDirty);
  m->dirty_epoch = g_epoch;
  g_young.by_order[m->order].push_front(m);
  count_dirty(m, +1);
}

// The list a dirty chunk is on: chunks older than the old generation have
// been purged, so its epoch tells young from old.
DList<ChunkMeta>& list_of(const ChunkMeta* m) {
  DirtyLists& gen = m->dirty_epoch == g_epoch ? g_young : g_old;
  return gen.by_order[m->order];
}

}  // namespace

// Puts a dirty chunk in the young generation, merged with dirty buddies
// (the merged extent covers both parts), so that released slabs of one size
// can serve requests of another without fresh memory.
ROOST_COMMON_TEXT void merge_dirty(ChunkMeta* m) {
  while (m->order < kMaxOrder) {
    auto [buddy, lower, upper] = buddy_of_kind(m, ChunkKind::kDirty);
    if (buddy == nullptr) break;
    // A lower half with a guard at its end stays apart until it is purged
    // (merge_free lifts the guard then): reused for a slab of its size, as
    // released slab chunks mostly are, it costs no mprotect.
    if (has_end_guard(lower)) break;
    list_of(buddy).remove(buddy);
    count_dirty(buddy, -1);
    if (upper->dirty_pages != 0)
      lower->dirty_pages = static_cast<uint32_t>(
          ((size_t{1} << lower->order) >> config::kMinPageBits) + upper->dirty_pages);
    set_kind(upper, ChunkKind::kUnused);
    set_order(lower, lower->order + 1u);
    m = lower;
  }
  push_dirty(m);
}

// Puts `m`, just taken off its dirty list, in front of `all` (chunks in
// transit to a purge, linked through `next`); returns the new list.
ChunkMeta* into_transit(ChunkMeta* m, ChunkMeta* all) {
  count_dirty(m, -1);
  set_kind(m, ChunkKind::kUnused);  // in transit: not found by merges
  m->next = all;
  return m;
}

namespace {

// Takes every chunk of `gen` off its lists and puts it in front of `all`;
// returns the new list.
ChunkMeta* detach(DirtyLists& gen, ChunkMeta* all = nullptr) {
  for (DList<ChunkMeta>& list : gen.by_order)
    while (ChunkMeta* m = list.pop_front()) all = into_transit(m, all);
  return all;
}

// Called with the lock held; returns with it held.  Purges `list` with the
// lock dropped (madvise is a system call), then merges it; returns the
// bytes purged.  A chunk the OS would not purge keeps its contents, so it
// goes back among the dirty ones (a later decay tries again) instead of the
// clean ones.  So does one in the block the service is collapsing, unless
// `wait` (malloc_trim: the purge waits out the collapse).
ROOST_COMMON_TEXT size_t purge_and_merge(ChunkMeta* list, bool wait = false) {
  if (list == nullptr) return 0;
  g_lock.unlock();
  bool zero = options::get(options::kPurgeZero) != 0;
  // The chunks were taken off their lists (kind kUnused) before this fence:
  // a collapse that starts after it sees them (backend/huge_pages.cc).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Chunks in transit belong to this thread: their dirty extents can change
  // without the lock.
  size_t purged = 0;
  for (ChunkMeta* m = list; m != nullptr; m = m->next) {
    size_t extent = dirty_extent(m);
    // (Not while the service collapses its block: it stays dirty.)
    bool may = huge_pages::before_purge(m->base, extent);
    while (!may && wait) {
      huge_pages::await_collapse(m->base, extent);
      may = huge_pages::before_purge(m->base, extent);
    }
    if (!may) continue;
    if (!os::purge(reinterpret_cast<void*>(m->base), extent, zero)) continue;
    m->dirty_pages = 0;
    purged += extent;
  }
  g_purged.fetch_add(purged, std::memory_order_relaxed);
  g_lock.lock();
  g_purged_recently += purged;
  while (list != nullptr) {
    ChunkMeta* next = list->next;
    if (list->dirty_pages == 0)
      merge_free(list);
    else
      merge_dirty(list);
    list = next;
  }
  return purged;
}

// Rule 3 (docs/DESIGN.md, "What stays resident"): the delay stretches.
// At a rotation: stretches or shrinks the purge delay (above) by what the
// program took during the delay that ends.
void adapt_delay() {
  size_t undone = g_taken_clean < g_purged_recently ? g_taken_clean : g_purged_recently;
  unsigned shift = g_delay_shift.load(std::memory_order_relaxed);
  if (undone >= config::kGranule && undone >= g_purged_recently / config::kUndonePurgeShare) {
    if (shift < config::kMaxPurgeDelayShift) shift++;
  } else if (g_handouts == 0 && shift > 0) {
    shift--;
  }
  g_delay_shift.store(shift, std::memory_order_relaxed);
  g_purged_recently >>= config::kPurgedLatelyShift;
  g_taken_clean = 0;
  g_handouts = 0;
}

// Whether to age the generations: a purge delay has passed since the last
// time.  `now` was read before the lock was taken, so it may be earlier
// than the last rotation.
bool rotation_due(uint64_t now) {
  return now >= g_rotated_ns && now - g_rotated_ns >= purge_delay_now_ns();
}
// Whether decay_locked() has work: aging, or dirty memory over its cap.
bool decay_due(uint64_t now) { return dirty_bytes() > dirty_cap() || rotation_due(now); }

// Rule 2: demand kept for big chunks.
// detach(g_old), but for up to `keep` bytes of its big chunks (the biggest
// first: they cost the most to fault in again), which move to the young
// lists instead.
ChunkMeta* detach_old_keeping(size_t keep) {
  ChunkMeta* all = nullptr;
  for (unsigned o = kMaxOrder + 1; o-- > 0;) {
    while (ChunkMeta* m = g_old.by_order[o].pop_front()) {
      size_t size = size_t{1} << o;
      if (o >= config::kDemandKeptMinOrder && size <= keep) {
        keep -= size;
        // Young for now (its epoch too, so that it never matches a later
        // young generation's): old again after the swap.
        m->dirty_epoch = g_epoch;
        g_young.by_order[o].push_front(m);
        continue;
      }
      all = into_transit(m, all);
    }
  }
  return all;
}

// Rule 1: the clock.
// Makes the young generation old and purges the old one (above).  Both
// locks held; returns the bytes purged.
size_t rotate_locked(uint64_t now) {
  size_t keep = g_taken;
  g_taken = 0;
  adapt_delay();
  ChunkMeta* old = detach_old_keeping(keep);
  for (unsigned o = 0; o <= kMaxOrder; o++) {
    // The young lists become the old ones (swap heads: O(orders)).
    ChunkMeta* head = g_young.by_order[o].head;
    g_young.by_order[o].head = nullptr;
    g_old.by_order[o].head = head;
  }
  g_epoch++;
  g_rotated_ns = now;
  return purge_and_merge(old);
}

// Rule 4: the cap follows the program.
// Over the cap: the old generation's chunks, then the young one's, the
// biggest first, until dirty memory is back to three quarters of the cap.
ChunkMeta* detach_over_cap() {
  ChunkMeta* all = nullptr;
  size_t mark = dirty_cap() / 4 * config::kDirtyAfterCapQuarters;
  for (DirtyLists* gen : {&g_old, &g_young})
    for (unsigned o = kMaxOrder + 1; o-- > 0;)
      while (dirty_bytes() > mark)
        if (ChunkMeta* m = gen->by_order[o].pop_front())
          all = into_transit(m, all);
        else
          break;
  return all;
}

}  // namespace

// Ages the generations if a delay has passed, and purges down to the
// mark if dirty memory passed its cap.  Both locks held; returns the
// bytes purged.
ROOST_COMMON_TEXT size_t decay_locked(uint64_t now) {
  size_t purged = rotation_due(now) ? rotate_locked(now) : 0;
  if (dirty_bytes() > dirty_cap()) purged += purge_and_merge(detach_over_cap());
  return purged;
}

// decay_locked() with only g_lock held: skipped while another thread purges
// (the aging is its job then).
ROOST_COMMON_TEXT size_t decay(uint64_t now) {
  if (!decay_due(now) || !g_purge_lock.try_lock()) return 0;
  size_t purged = decay_locked(now);
  g_purge_lock.unlock();
  return purged;
}

namespace {

// Of `gen`'s dirty chunks of `order`, the one whose dirty extent fits
// `fill` bytes best: the smallest that covers them, else the biggest.
// Looks at config::kMaxMoveLooks chunks at most; nullptr if there is none.
ChunkMeta* best_fit(unsigned order, size_t fill) {
  ChunkMeta* best = nullptr;
  size_t best_extent = 0;
  unsigned looked = 0;
  for (DirtyLists* gen : {&g_young, &g_old}) {
    for (ChunkMeta* d = gen->by_order[order].head; d != nullptr; d = d->next) {
      if (looked++ == config::kMaxMoveLooks) return best;
      size_t e = dirty_extent(d);
      bool better =
          best == nullptr || (e >= fill ? best_extent < fill || e < best_extent : best_extent < e);
      if (better) {
        best = d;
        best_extent = e;
      }
    }
  }
  return best;
}

}  // namespace

// Rule 5: which dirty chunk is reused.
// A dirty chunk of `order` to `max_order`, split down to `order`; nullptr
// if none.  The smallest that fits: a bigger one is split only when no
// chunk of the size is dirty, so that big chunks stay whole for big
// requests.  Of a size, the younger of two, or where `fill` says how many
// bytes the caller will use (0: not told), the one whose dirty extent
// fits them best.
ROOST_COMMON_TEXT ChunkMeta* take_dirty(unsigned order, unsigned max_order, size_t fill) {
  for (unsigned j = order; j <= max_order; j++) {
    ChunkMeta* m = nullptr;
    if (j == order && fill != 0) {
      m = best_fit(j, fill);
      if (m != nullptr) list_of(m).remove(m);
    } else {
      for (DirtyLists* gen : {&g_young, &g_old})
        if (m == nullptr) m = gen->by_order[j].pop_front();
    }
    if (m == nullptr) continue;
    count_dirty(m, -1);
    split(m, order, [](ChunkMeta* upper) {
      if (upper->dirty_pages == 0)
        push_free(upper);  // its lower buddy is out: nothing to merge with
      else
        push_dirty(upper);
    });
    return m;
  }
  return nullptr;
}

DList<ChunkMeta>& dirty_list(Generation gen, unsigned order) {
  return (gen == Generation::kOld ? g_old : g_young).by_order[order];
}

ROOST_COMMON_TEXT void note_handout(unsigned order, bool clean) {
  if (clean) g_taken_clean += size_t{1} << order;
  g_handouts++;
  if (order >= config::kDemandKeptMinOrder) g_taken += size_t{1} << order;
}

void note_moved_in(size_t bytes) {
  // Memory that did not have to be faulted in after all.
  g_taken_clean -= bytes < g_taken_clean ? bytes : g_taken_clean;
}

ROOST_COMMON_TEXT bool has_dirty(unsigned order) {
  for (unsigned j = order; j <= kMaxOrder; j++)
    // Relaxed: a hint (chunk_allocator.h).
    if (g_dirty_chunks[j].load(std::memory_order_relaxed) != 0) return true;
  return false;
}

ROOST_COMMON_TEXT uint64_t purge_delay_now_ns() {
  // Relaxed: a figure that orders nothing (above).
  return (options::get(options::kPurgeDelayMs) * 1000000u)
         << g_delay_shift.load(std::memory_order_relaxed);
}

// Rule 6: malloc_trim.
bool purge_all() {
  LockGuard purging(g_purge_lock);
  LockGuard guard(g_lock);
  ChunkMeta* all = detach(g_young, detach(g_old));
  bool any = all != nullptr;
  purge_and_merge(all, true);
  // Asked for by the program: no sign that it will want the memory back.
  g_delay_shift.store(0, std::memory_order_relaxed);  // relaxed: as above
  g_purged_recently = 0;
  return any;
}

ROOST_COMMON_TEXT size_t purge_due(uint64_t now, uint64_t* next_ns) {
  LockGuard purging(g_purge_lock);
  LockGuard guard(g_lock);
  size_t purged = decay_locked(now);
  *next_ns = dirty_bytes() == 0 ? UINT64_MAX : g_rotated_ns + purge_delay_now_ns();
  return purged;
}

// Relaxed loads throughout: statistics and hints.
ROOST_COMMON_TEXT size_t dirty_bytes() { return g_dirty.load(std::memory_order_relaxed); }
size_t dirty_cap() {
  size_t out = bytes_out();
  return out > config::kDirtyCapFloor ? out : config::kDirtyCapFloor;
}
size_t purged_bytes() { return g_purged.load(std::memory_order_relaxed); }

}  // namespace roost::chunks
