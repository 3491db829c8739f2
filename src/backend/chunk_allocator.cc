// backend/chunk_allocator.cc — implementation of backend/chunk_allocator.h.
//
// Decay: dirty chunks sit in two generations of per-order lists.  Releases
// go to the young generation; every purge delay the young one becomes old,
// and the old one is purged (outside the lock) and merged into the buddy
// lists, but for as many bytes of its big chunks (config::kDemandKeptMinOrder
// and up) as the program took in big chunks during that delay: those stay
// old for another delay.  So a program that keeps cycling big buffers
// through the backend keeps about one delay's worth of that demand
// resident and does not fault it in again, while one that stops asking (or
// sleeps) has every dirty chunk purged within three delays of its last
// request.  The delay stretches while purges are undone (g_delay_shift).
// Over its cap (dirty_cap(): the bytes handed out, config::kDirtyCapFloor at
// least), old chunks and then young ones, the biggest first, are purged at
// once down to three quarters of the cap, whatever the clock says.
// Allocation takes the smallest dirty chunk that fits, the younger of two
// of a size; then the smallest clean one in the buddy lists; then a cut
// from the fresh extent (the newest region's unused top, below).  The
// clock is read on these slow paths only.  Who ages the generations: the
// next allocation or release that finds the delay passed, or the service
// thread (purge_due), which wakes when the delay has passed, so that
// memory is purged also while the program sleeps.
#include "backend/chunk_allocator.h"

#include <atomic>

#include "backend/address_space.h"
#include "backend/huge_pages.h"
#include "backend/meta_arena.h"
#include "ds/dlist.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/access_fault.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::chunks {

namespace {

constexpr size_t kGranulesPerRegion = config::kRegion >> config::kGranuleBits;
constexpr size_t kRegionSlots = size_t{1} << (config::kAddressBits - config::kRegionBits);

// The metadata of one 1 GiB slot of the address space: a record per
// granule, for every region in the slot (records of granules outside them
// stay zero: kind kUnused, so no merge crosses into memory roost does not
// own).
struct Region {
  ChunkMeta meta[kGranulesPerRegion];
  std::atomic<uint8_t> block_state[config::kRegion >> kBlockBits];
  // Per block, its granules in chunks handed out (0 to 32; the filler's,
  // under the lock).
  uint8_t granules_out[config::kRegion >> kBlockBits];  // backend/huge_pages.cc's
  // A bit per granule: its last small page is a guard (has_end_guard).
  std::atomic<uint64_t> guard_bits[kGranulesPerRegion / 64];
};

// A generation of dirty chunks, by order.
struct DirtyLists {
  DList<ChunkMeta> by_order[kMaxOrder + 1];
};

std::atomic<Region*> g_regions[kRegionSlots];  // indexed by address >> kRegionBits (the slot)
// The slots that hold tables lie in [g_first_slot, g_end_slot) (for scans).
std::atomic<size_t> g_first_slot{kRegionSlots};
std::atomic<size_t> g_end_slot{0};
SpinLock g_lock;
// One purge at a time: taken before g_lock, or tried with it held.  So
// malloc_trim (purge_all) and fork wait for a purge in progress, whose
// chunks are in transit, still resident and on no list.
SpinLock g_purge_lock;
DList<ChunkMeta> g_free[kMaxOrder + 1];
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
// Counters written under the lock (but for split pieces) and read without it.
std::atomic<size_t> g_reserved{0};
std::atomic<size_t> g_bytes_out{0};
std::atomic<size_t> g_chunks_out{0};
std::atomic<size_t> g_dirty{0};                       // bytes in dirty extents
std::atomic<uint32_t> g_dirty_chunks[kMaxOrder + 1];  // per order, both generations
std::atomic<size_t> g_purged{0};
std::atomic<ReleaseHook> g_release_hook{nullptr};

// The unused top of the newest region: [g_fresh_begin, g_fresh_end),
// in the region that starts at g_fresh_region.  Clean chunks are cut from
// its bottom, each aligned to its size (the gap below a cut goes to the
// buddy lists), and a clean block freed next to its bottom rejoins it.  So
// no record of a granule in it has been written since it became fresh:
// kind kUnused, found by no merge.  A region handed to the buddy lists
// whole would write a record at every halving down to the first chunk,
// one page of its table apart each (a few dozen KiB that a small program
// never uses).
uintptr_t g_fresh_region = 0;
uintptr_t g_fresh_begin = 0;
uintptr_t g_fresh_end = 0;

// Reserves a region of at least 2^min_order bytes (address_space.h sizes
// it) and its slot's metadata table if it is the slot's first; returns its
// base and, in *order, its order.  0 when the OS refuses.
uintptr_t add_region(unsigned min_order, unsigned* order) {
  void* mem = address_space::reserve_region(min_order, order);
  if (mem == nullptr) return 0;
  uintptr_t base = reinterpret_cast<uintptr_t>(mem);
  size_t index = base >> config::kRegionBits;
  std::atomic<Region*>& slot = g_regions[index];
  if (slot.load(std::memory_order_relaxed) == nullptr) {
    auto* table = static_cast<Region*>(meta_arena::alloc(sizeof(Region), 64));
    if (table == nullptr) {
      address_space::release_region(mem, *order);
      return 0;
    }
    slot.store(table, std::memory_order_release);
    if (index < g_first_slot.load(std::memory_order_relaxed))
      g_first_slot.store(index, std::memory_order_release);
    if (index >= g_end_slot.load(std::memory_order_relaxed))
      g_end_slot.store(index + 1, std::memory_order_release);
  }
  g_reserved.fetch_add(size_t{1} << *order, std::memory_order_relaxed);
  huge_pages::fit_region(base, size_t{1} << *order);
  return base;
}

Region* region_of(uintptr_t addr) {
  return g_regions[addr >> config::kRegionBits].load(std::memory_order_acquire);
}

// Guard pages at chunks' ends (chunk_allocator.h).  Relaxed throughout:
// the counts order nothing (a cap, statistics), and a chunk's bit is set
// and cleared only by the one holder of the chunk (atomically, since a
// word holds 64 granules' bits that other holders change).
std::atomic<size_t> g_end_guards{0};
std::atomic<size_t> g_end_guards_refused{0};

// The word of guard bits of the granule at `granule` (in a region), and
// its bit in *bit.
std::atomic<uint64_t>& guard_word(uintptr_t granule, uint64_t* bit) {
  size_t index = (granule >> config::kGranuleBits) & (kGranulesPerRegion - 1);
  *bit = uint64_t{1} << (index % 64);
  return region_of(granule)->guard_bits[index / 64];
}
uintptr_t chunk_end(const ChunkMeta* m) { return m->base + (size_t{1} << m->order); }

// lift_end_guard() where `m` has one.
ROOST_SLOW bool lift_end_guard_slow(ChunkMeta* m) {
  if (!os::make_accessible(reinterpret_cast<void*>(chunk_end(m) - config::kMinPageSize),
                           config::kMinPageSize))
    return false;
  uint64_t bit;
  guard_word(chunk_end(m) - config::kGranule, &bit).fetch_and(~bit, std::memory_order_relaxed);
  g_end_guards.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void push_free(ChunkMeta* m) {
  set_kind(m, ChunkKind::kFree);
  g_free[m->order].push_front(m);
}

// Puts a clean chunk in the buddy lists, merging it with free buddies.
ROOST_COMMON_TEXT void merge_free(ChunkMeta* m) {
  while (m->order < kMaxOrder) {
    uintptr_t buddy_base = m->base ^ (uintptr_t{1} << m->order);
    ChunkMeta* buddy = meta_of(buddy_base);
    if (kind_of(buddy) != ChunkKind::kFree || order_of(buddy) != m->order) break;
    ChunkMeta* lower = buddy_base < m->base ? buddy : m;
    ChunkMeta* upper = buddy_base < m->base ? m : buddy;
    // (Its guard would lie inside the merged chunk; kept where the OS refuses.)
    if (!lift_end_guard(lower)) break;
    g_free[buddy->order].remove(buddy);
    set_kind(upper, ChunkKind::kUnused);
    set_order(lower, lower->order + 1u);
    m = lower;
  }
  // Whole blocks, free and clean: no collapse's pages are left in them.
  if (m->order >= kBlockBits) huge_pages::cleaned(m->base, size_t{1} << m->order);
  if (m->base + (size_t{1} << m->order) == g_fresh_begin && m->base >= g_fresh_region &&
      lift_end_guard(m)) {
    set_kind(m, ChunkKind::kUnused);  // back in the fresh extent
    g_fresh_begin = m->base;
    return;
  }
  push_free(m);
}

// Puts the clean range [begin, end) (granule-aligned, inside one region)
// in the buddy lists as the fewest naturally aligned blocks.
ROOST_COMMON_TEXT void free_range(uintptr_t begin, uintptr_t end) {
  while (begin < end) {
    unsigned order = static_cast<unsigned>(__builtin_ctzl(begin));
    unsigned fits = bits::log2_floor(end - begin);
    if (order > fits) order = fits;
    ChunkMeta* m = meta_of(begin);
    m->base = begin;
    set_order(m, order);
    m->dirty_pages = 0;
    merge_free(m);
    begin += size_t{1} << order;
  }
}

// A clean chunk of 2^order bytes cut from the fresh extent, from a new
// region's when the current one has no room for it (what is left of the
// current one goes to the buddy lists); nullptr when the OS refuses.
ChunkMeta* cut_fresh(unsigned order) {
  size_t size = size_t{1} << order;
  uintptr_t at = bits::align_up(g_fresh_begin, size);
  if (at + size > g_fresh_end) {  // also when it is empty
    unsigned region_order = 0;
    uintptr_t base = add_region(order, &region_order);
    if (base == 0) return nullptr;
    uintptr_t rest = g_fresh_begin, rest_end = g_fresh_end;
    g_fresh_region = base;
    g_fresh_begin = base;
    g_fresh_end = base + (size_t{1} << region_order);
    // (Memcheck: they point at regions, and so at blocks: no pointers of
    // the program's.)
    memcheck::unaddressable(&g_fresh_region, sizeof(g_fresh_region));
    memcheck::unaddressable(&g_fresh_begin, sizeof(g_fresh_begin));
    memcheck::unaddressable(&g_fresh_end, sizeof(g_fresh_end));
    free_range(rest, rest_end);
    at = base;
  }
  uintptr_t gap = g_fresh_begin;
  g_fresh_begin = at + size;
  free_range(gap, at);
  ChunkMeta* m = meta_of(at);
  m->base = at;
  set_order(m, order);
  return m;
}

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

// Puts a dirty chunk in the young generation, merged with dirty buddies
// (the merged extent covers both parts), so that released slabs of one size
// can serve requests of another without fresh memory.
ROOST_COMMON_TEXT void merge_dirty(ChunkMeta* m) {
  while (m->order < kMaxOrder) {
    uintptr_t buddy_base = m->base ^ (uintptr_t{1} << m->order);
    ChunkMeta* buddy = meta_of(buddy_base);
    if (kind_of(buddy) != ChunkKind::kDirty || order_of(buddy) != m->order) break;
    ChunkMeta* lower = buddy_base < m->base ? buddy : m;
    ChunkMeta* upper = buddy_base < m->base ? m : buddy;
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
  g_purged_recently /= 2;
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

// A dirty chunk of `order` to `max_order`, split down to `order`; nullptr
// if none.  The smallest that fits: a bigger one is split only when no
// chunk of the size is dirty, so that big chunks stay whole for big
// requests.  Of a size, the younger of two, or where `fill` says how many
// bytes the caller will use (0: not told), the one whose dirty extent
// fits them best.
ChunkMeta* take_dirty(unsigned order, unsigned max_order, size_t fill) {
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

// Counts chunk `m`'s granules into (+1) or out of (-1) its blocks'
// granules_out.  Lock held.
ROOST_COMMON_TEXT void count_out(const ChunkMeta* m, int sign) {
  Region* r = region_of(m->base);
  size_t first = (m->base & (config::kRegion - 1)) >> kBlockBits;
  if (m->order < kBlockBits) {
    auto n = static_cast<uint8_t>(1u << (m->order - kMinOrder));
    r->granules_out[first] = static_cast<uint8_t>(r->granules_out[first] + sign * n);
    return;
  }
  constexpr uint8_t kWhole = 1u << (kBlockBits - kMinOrder);
  for (size_t b = first; b < first + (size_t{1} << (m->order - kBlockBits)); b++)
    r->granules_out[b] = static_cast<uint8_t>(r->granules_out[b] + sign * kWhole);
}

// The filler (ROOST_HUGEPAGES=dense): of the first config::kFillerLooks
// free chunks of `order` (below a block's), the one in the block with the
// most granules out, taken off its list; nullptr if there is none.  Small
// chunks so pack into blocks already in use, which then become dense,
// rather than spread over empty ones.
ROOST_COMMON_TEXT ChunkMeta* pop_fullest(unsigned order) {
  ChunkMeta* best = nullptr;
  int best_out = -1;
  unsigned looked = 0;
  for (ChunkMeta* c = g_free[order].head; c != nullptr && looked < config::kFillerLooks;
       c = c->next, looked++) {
    int out = region_of(c->base)->granules_out[(c->base & (config::kRegion - 1)) >> kBlockBits];
    if (out > best_out) {
      best = c;
      best_out = out;
    }
  }
  if (best != nullptr) g_free[order].remove(best);
  return best;
}

// A free chunk of `order` or the smallest bigger one; nullptr if none.
ROOST_COMMON_TEXT ChunkMeta* pop_free(unsigned order) {
  bool fill = options::get(options::kHugePages) == options::kHugeDense;
  for (unsigned j = order; j <= kMaxOrder; j++) {
    if (g_free[j].head == nullptr) continue;
    return fill && j < kBlockBits ? pop_fullest(j) : g_free[j].pop_front();
  }
  return nullptr;
}

void note_out(unsigned order) {
  g_handouts++;
  if (order >= config::kDemandKeptMinOrder) g_taken += size_t{1} << order;
  g_bytes_out.fetch_add(size_t{1} << order, std::memory_order_relaxed);
  g_chunks_out.fetch_add(1, std::memory_order_relaxed);
}

// take() with the lock held and the decay done.
ROOST_COMMON_TEXT ChunkMeta* take_locked(unsigned order, unsigned max_dirty_order, bool clean,
                                         size_t fill = 0) {
  ChunkMeta* m = take_dirty(order, max_dirty_order, fill);
  if (m == nullptr) {
    if (!clean) return nullptr;
    m = pop_free(order);
    if (m == nullptr) m = cut_fresh(order);
    if (m == nullptr) return nullptr;
    g_taken_clean += size_t{1} << order;
    m->dirty_pages = 0;  // purged or never touched
    split(m, order, [](ChunkMeta* upper) { push_free(upper); });
  }
  set_kind(m, ChunkKind::kUnused);
  note_out(order);
  count_out(m, +1);
  return m;
}

// A chunk of 2^order bytes: dirty memory first (split from a chunk of at
// most 2^max_dirty_order bytes), then, if `clean` allows, memory that reads
// as zero.  nullptr when there is none (or the OS refuses).
ROOST_COMMON_TEXT ChunkMeta* take(unsigned order, unsigned max_dirty_order, bool clean) {
  uint64_t now = os::now_ns();
  ChunkMeta* m;
  {
    LockGuard guard(g_lock);
    decay(now);
    m = take_locked(order, max_dirty_order, clean);
  }
  // A heap that grows may have dense blocks for the service to look at
  // (backend/huge_pages.h): it is woken once, not at every chunk.
  if (m != nullptr && huge_pages::wants_look())
    if (ReleaseHook hook = g_release_hook.load(std::memory_order_relaxed)) hook();
  return m;
}

// ---- moving released pages into a chunk handed out (config::kMoveBits) ----

constexpr size_t kMoveUnit = size_t{1} << config::kMoveBits;
std::atomic<size_t> g_moved{0};  // bytes moved since start (move())

// The moves planned for one chunk: from each donor (a dirty chunk in
// transit) the last `bytes` of its dirty extent rounded up to kMoveUnit,
// after which it keeps `kept_pages` pages of that extent.
struct Moves {
  ChunkMeta* donor[config::kMaxMovesPerChunk];
  uintptr_t from[config::kMaxMovesPerChunk];
  size_t bytes[config::kMaxMovesPerChunk];
  uint32_t kept_pages[config::kMaxMovesPerChunk];
  unsigned count = 0;
  uintptr_t to = 0;  // where the first goes; each next one follows the last that moved
};

// Plans a move of the last `n` bytes (n <= whole) of the rounded extent
// (`whole`, inside `d`) of the dirty chunk `d`, taken off `list`.
void plan_move(Moves* moves, DList<ChunkMeta>& list, ChunkMeta* d, size_t whole, size_t n) {
  list.remove(d);
  size_t extent = dirty_extent(d);
  into_transit(d, nullptr);
  unsigned i = moves->count++;
  moves->donor[i] = d;
  moves->from[i] = d->base + whole - n;
  moves->bytes[i] = n;
  size_t kept = whole - n < extent ? whole - n : extent;
  moves->kept_pages[i] = static_cast<uint32_t>(kept >> config::kMinPageBits);
}

// Lock held: plans moves into `m` (just taken) from its dirty extent
// (rounded up to kMoveUnit) up to `fill` bytes, from dirty chunks of
// kMoveUnit and up, the biggest first (the old generation's before the
// young one's: they are nearer their purge), each moved whole where its
// dirty extent fits what is left to fill (what a program wrote of a buffer
// lies at its head, and lands at the head of what it fills); what no whole
// one fills takes the tail of the smallest extent seen that does not fit.
// Takes the donors off their lists.
void plan_moves(ChunkMeta* m, size_t fill, Moves* moves) {
  size_t size = size_t{1} << m->order;
  size_t at = bits::align_up(dirty_extent(m), kMoveUnit);
  size_t want = bits::align_up(fill < size ? fill : size, kMoveUnit);
  // A move replaces the pages it lands on: not the chunk's end guard.
  if (has_end_guard(m) && want > size - kMoveUnit) want = size - kMoveUnit;
  if (want < at) want = at;
  moves->to = m->base + at;
  unsigned looked = 0;
  ChunkMeta* too_big = nullptr;  // the smallest extent seen that does not fit, and its list
  DList<ChunkMeta>* too_big_list = nullptr;
  for (unsigned o = kMaxOrder + 1; o-- > config::kMoveBits;) {
    for (DirtyLists* gen : {&g_old, &g_young}) {
      DList<ChunkMeta>& list = gen->by_order[o];
      for (ChunkMeta *d = list.head, *next; d != nullptr; d = next) {
        if (at == want || moves->count == config::kMaxMovesPerChunk ||
            looked++ == config::kMaxMoveLooks)
          goto done;
        next = d->next;
        if (has_end_guard(d)) continue;  // (a move would take its guard page along)
        size_t whole = bits::align_up(dirty_extent(d), kMoveUnit);  // inside d
        if (whole <= want - at) {
          plan_move(moves, list, d, whole, whole);
          at += whole;
        } else if (too_big == nullptr || dirty_extent(d) < dirty_extent(too_big)) {
          too_big = d;
          too_big_list = &list;
        }
      }
    }
  }
done:
  // (It did not fit when seen, and what is left has only shrunk: n < whole.)
  if (at < want && too_big != nullptr && moves->count < config::kMaxMovesPerChunk) {
    size_t whole = bits::align_up(dirty_extent(too_big), kMoveUnit);
    plan_move(moves, *too_big_list, too_big, whole, whole < want - at ? whole : want - at);
  }
}

// Whether the bytes [from, from + n) of the dirty chunk `d` are worth
// moving: its pages at four points through the part of them in its dirty
// extent are resident.  A program that wrote only a buffer's head and tail
// leaves a long extent of which little is resident; moving it would only
// pin its head, far from the head of what it fills.
bool worth_moving(const ChunkMeta* d, uintptr_t from, size_t n) {
  uintptr_t end = d->base + dirty_extent(d);
  if (from + n < end) end = from + n;
  if (end <= from) return false;
  const size_t page = os::page_size();
  for (size_t k = 1; k < 8; k += 2) {
    uintptr_t at = (from + (end - from) / 8 * k) & ~(page - 1);
    if (!os::resident(reinterpret_cast<const void*>(at))) return false;
  }
  return true;
}

// Carries out `moves` into `m` with only the purge lock held (which keeps
// fork and malloc_trim waiting while the donors are in transit), then puts
// the donors back (dirty with what they kept, or clean) and sets `m`'s
// dirty extent.  The first move the OS refuses ends the moves (a donor
// moved in part keeps its whole extent).
// Returns `m`, or nullptr when a failed move took part of it from roost:
// the chunk is lost, and the caller takes another.
ChunkMeta* carry_out(ChunkMeta* m, Moves* moves) {
  uintptr_t to = moves->to;
  size_t moved = 0;
  os::Moved r = os::Moved::kMoved;
  for (unsigned i = 0; i < moves->count && r == os::Moved::kMoved; i++) {
    size_t n = moves->bytes[i];
    if (!worth_moving(moves->donor[i], moves->from[i], n)) continue;
    size_t done = move(moves->from[i], to, n, &r);
    to += done;
    moved += done;
    if (done == n) moves->donor[i]->dirty_pages = moves->kept_pages[i];
  }
  // Up to `to`, m may hold old bytes.
  if (moved != 0) m->dirty_pages = static_cast<uint32_t>((to - m->base) >> config::kMinPageBits);
  LockGuard guard(g_lock);
  for (unsigned i = 0; i < moves->count; i++) {
    ChunkMeta* d = moves->donor[i];
    if (d->dirty_pages == 0)
      merge_free(d);
    else
      merge_dirty(d);
  }
  // Memory that did not have to be faulted in after all.
  g_taken_clean -= moved < g_taken_clean ? moved : g_taken_clean;
  if (r != os::Moved::kLost) return m;
  size_t size = size_t{1} << m->order;
  count_out(m, -1);
  g_bytes_out.fetch_sub(size, std::memory_order_relaxed);
  g_chunks_out.fetch_sub(1, std::memory_order_relaxed);
  return nullptr;
}

// alloc(order, fill) where moves may fill the chunk: under the purge lock
// (tried: while another thread purges, the chunk is taken without moves).
ChunkMeta* take_filled(unsigned order, size_t fill) {
  if (!g_purge_lock.try_lock()) return take(order, kMaxOrder, true);
  Moves moves;
  ChunkMeta* m;
  {
    uint64_t now = os::now_ns();
    LockGuard guard(g_lock);
    decay_locked(now);
    m = take_locked(order, kMaxOrder, true, fill);
    if (m != nullptr && dirty_extent(m) < fill) plan_moves(m, fill, &moves);
  }
  if (m != nullptr && moves.count != 0) m = carry_out(m, &moves);
  g_purge_lock.unlock();
  return m != nullptr ? m : take(order, kMaxOrder, true);
}

}  // namespace

ROOST_COMMON_TEXT ChunkMeta* meta_of(uintptr_t addr) {
  return &region_of(addr)->meta[(addr >> config::kGranuleBits) & (kGranulesPerRegion - 1)];
}

ROOST_COMMON_TEXT std::atomic<uint8_t>* block_state_of(uintptr_t addr) {
  if (addr >> config::kRegionBits >= kRegionSlots) return nullptr;
  Region* r = region_of(addr);
  if (r == nullptr) return nullptr;
  return &r->block_state[(addr & (config::kRegion - 1)) >> kBlockBits];
}

Slots slots() {
  return {g_first_slot.load(std::memory_order_acquire), g_end_slot.load(std::memory_order_acquire)};
}

ROOST_COMMON_TEXT ChunkMeta* alloc(unsigned order) { return take(order, kMaxOrder, true); }

size_t move(uintptr_t from, uintptr_t to, size_t bytes, os::Moved* result) {
  size_t done = 0;
  *result = os::Moved::kMoved;
  while (done < bytes) {
    *result = os::move_pages(reinterpret_cast<void*>(from + done),
                             reinterpret_cast<void*>(to + done), kMoveUnit);
    if (*result != os::Moved::kMoved) break;
    huge_pages::moved(from + done, to + done, kMoveUnit);
    done += kMoveUnit;
  }
  g_moved.fetch_add(done, std::memory_order_relaxed);
  return done;
}

ChunkMeta* alloc(unsigned order, size_t fill) {
  if (order <= config::kMoveBits || reserved_bytes() > config::kMoveMaxReservedBytes)
    return take(order, kMaxOrder, true);
  return take_filled(order, fill);
}

void for_each_record(ChunkKind kind, void (*visit)(const ChunkMeta* m, void* ctx), void* ctx) {
  size_t end = g_end_slot.load(std::memory_order_acquire);
  for (size_t slot = g_first_slot.load(std::memory_order_acquire); slot < end; slot++) {
    const Region* r = g_regions[slot].load(std::memory_order_acquire);
    if (r == nullptr) continue;
    for (const ChunkMeta& m : r->meta)
      if (kind_of(&m) == kind) visit(&m, ctx);
  }
}

ROOST_COMMON_TEXT ChunkMeta* alloc_dirty(unsigned order, unsigned max_order) {
  if (!has_dirty(order)) return nullptr;
  return take(order, max_order, false);
}

ROOST_COMMON_TEXT bool has_dirty(unsigned order) {
  for (unsigned j = order; j <= kMaxOrder; j++)
    if (g_dirty_chunks[j].load(std::memory_order_relaxed) != 0) return true;
  return false;
}

ROOST_COMMON_TEXT void release(ChunkMeta* m, size_t dirty_bytes) {
  uint64_t now = os::now_ns();
  size_t size = size_t{1} << m->order;
  if (dirty_bytes > size) dirty_bytes = size;
  dirty_bytes = huge_pages::filled_extent(m->base, size, dirty_bytes);
  m->dirty_pages = static_cast<uint32_t>(bits::align_up(dirty_bytes, config::kMinPageSize) /
                                         config::kMinPageSize);
  {
    LockGuard guard(g_lock);
    count_out(m, -1);
    g_bytes_out.fetch_sub(size, std::memory_order_relaxed);
    g_chunks_out.fetch_sub(1, std::memory_order_relaxed);
    if (m->dirty_pages == 0)
      merge_free(m);
    else
      merge_dirty(m);
    decay(now);
  }
  if (g_dirty.load(std::memory_order_relaxed) != 0)
    if (ReleaseHook hook = g_release_hook.load(std::memory_order_relaxed)) hook();
}

ROOST_COMMON_TEXT uint64_t purge_delay_now_ns() {
  return (options::get(options::kPurgeDelayMs) * 1000000u)
         << g_delay_shift.load(std::memory_order_relaxed);
}

bool purge_all() {
  LockGuard purging(g_purge_lock);
  LockGuard guard(g_lock);
  ChunkMeta* all = detach(g_young, detach(g_old));
  bool any = all != nullptr;
  purge_and_merge(all, true);
  // Asked for by the program: no sign that it will want the memory back.
  g_delay_shift.store(0, std::memory_order_relaxed);
  g_purged_recently = 0;
  return any;
}

ROOST_COMMON_TEXT ReleaseHook set_release_hook(ReleaseHook hook) {
  return g_release_hook.exchange(hook, std::memory_order_relaxed);
}

ROOST_COMMON_TEXT size_t purge_due(uint64_t now, uint64_t* next_ns) {
  LockGuard purging(g_purge_lock);
  LockGuard guard(g_lock);
  size_t purged = decay_locked(now);
  *next_ns = dirty_bytes() == 0 ? UINT64_MAX : g_rotated_ns + purge_delay_now_ns();
  return purged;
}

Extent fresh_extent() {
  LockGuard guard(g_lock);
  return {g_fresh_begin, g_fresh_end};
}

ROOST_COMMON_TEXT void note_split_piece() { g_chunks_out.fetch_add(1, std::memory_order_relaxed); }

bool has_end_guard(const ChunkMeta* m) {
  if constexpr (!config::kGuardSlabs) return false;
  uint64_t bit;
  std::atomic<uint64_t>& word = guard_word(chunk_end(m) - config::kGranule, &bit);
  return (word.load(std::memory_order_relaxed) & bit) != 0;
}

ROOST_SLOW bool place_end_guard(ChunkMeta* m) {
  if constexpr (!config::kGuardSlabs) return false;
  if (has_end_guard(m)) return true;
  if (os::page_size() == config::kMinPageSize &&
      g_end_guards.fetch_add(1, std::memory_order_relaxed) < config::kMaxSlabGuards) {
    if (os::make_inaccessible(reinterpret_cast<void*>(chunk_end(m) - config::kMinPageSize),
                              config::kMinPageSize)) {
      uint64_t bit;
      guard_word(chunk_end(m) - config::kGranule, &bit).fetch_or(bit, std::memory_order_relaxed);
      // A store into it then ends in roost's diagnostic, not a bare SIGSEGV.
      access_fault::arm();
      return true;
    }
    g_end_guards.fetch_sub(1, std::memory_order_relaxed);
  } else if (os::page_size() == config::kMinPageSize) {
    g_end_guards.fetch_sub(1, std::memory_order_relaxed);
  }
  g_end_guards_refused.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool lift_end_guard(ChunkMeta* m) {
  if (!has_end_guard(m)) return true;
  return lift_end_guard_slow(m);
}

bool in_end_guard(uintptr_t addr) {
  if constexpr (!config::kGuardSlabs) return false;
  if (addr >> config::kRegionBits >= kRegionSlots) return false;
  const Region* r = g_regions[addr >> config::kRegionBits].load(std::memory_order_acquire);
  if (r == nullptr) return false;
  size_t index = (addr >> config::kGranuleBits) & (kGranulesPerRegion - 1);
  if ((r->guard_bits[index / 64].load(std::memory_order_relaxed) & (uint64_t{1} << (index % 64))) ==
      0)
    return false;
  return (addr & (config::kGranule - 1)) >= config::kGranule - config::kMinPageSize;
}

size_t end_guards() { return g_end_guards.load(std::memory_order_relaxed); }
size_t end_guards_refused() { return g_end_guards_refused.load(std::memory_order_relaxed); }

size_t reserved_bytes() { return g_reserved.load(std::memory_order_relaxed); }
ROOST_COMMON_TEXT size_t bytes_out() { return g_bytes_out.load(std::memory_order_relaxed); }
ROOST_COMMON_TEXT size_t dirty_bytes() { return g_dirty.load(std::memory_order_relaxed); }
size_t dirty_cap() {
  size_t out = bytes_out();
  return out > config::kDirtyCapFloor ? out : config::kDirtyCapFloor;
}
size_t purged_bytes() { return g_purged.load(std::memory_order_relaxed); }
size_t moved_bytes() { return g_moved.load(std::memory_order_relaxed); }
size_t chunks_out() { return g_chunks_out.load(std::memory_order_relaxed); }

void lock_for_fork() {
  g_purge_lock.lock();
  g_lock.lock();
  address_space::lock_for_fork();
}
void unlock_after_fork(bool child) {
  address_space::unlock_after_fork(child);
  g_lock.unlock_after_fork(child);
  g_purge_lock.unlock_after_fork(child);
}

}  // namespace roost::chunks
