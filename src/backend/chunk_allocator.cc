// backend/chunk_allocator.cc — implementation of backend/chunk_allocator.h:
// the regions, their records, the fresh extent and the buddy lists.
//
// Owns: where a chunk comes from and where a clean one goes.  Allocation
// takes a released ("dirty") chunk first (backend/residency.cc chooses
// it), then the smallest clean one in the buddy lists; then a cut from the
// fresh extent (the newest region's unused top, below).  A released chunk
// goes to the residency policy (backend/residency.cc: how long it stays
// resident), a clean one merges with its free buddies here.  Big chunks may
// be filled with released pages moved in (backend/page_moves.cc).  The
// clock is read on these slow paths only; backend/chunk_internal.h is what
// the two other files use of this one.
// Must never: decide when released memory is purged (residency.cc does),
// purge or move pages under its lock, or be called on a fast path.
#include "backend/chunk_allocator.h"

#include <atomic>

#include "backend/address_space.h"
#include "backend/chunk_internal.h"
#include "backend/huge_pages.h"
#include "backend/meta_arena.h"
#include "backend/page_moves.h"
#include "backend/residency.h"
#include "ds/dlist.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/access_fault.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::chunks {

// (backend/chunk_internal.h)
SpinLock g_lock;
SpinLock g_purge_lock;

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
  // Per block, its granules in chunks handed out (0 to 32): written under
  // the lock, read there by the filler and without it by the dense looks.
  std::atomic<uint8_t> granules_out[config::kRegion >> kBlockBits];
  // A bit per granule: its last small page is a guard (has_end_guard).
  std::atomic<uint64_t> guard_bits[kGranulesPerRegion / 64];
};

std::atomic<Region*> g_regions[kRegionSlots];  // indexed by address >> kRegionBits (the slot)
// The slots that hold tables lie in [g_first_slot, g_end_slot) (for scans).
std::atomic<size_t> g_first_slot{kRegionSlots};
std::atomic<size_t> g_end_slot{0};
DList<ChunkMeta> g_free[kMaxOrder + 1];
// Counters written under the lock (but for split pieces) and read without it
// (relaxed: figures that order nothing).
std::atomic<size_t> g_reserved{0};
std::atomic<size_t> g_bytes_out{0};
std::atomic<size_t> g_chunks_out{0};
// set_release_hook's (relaxed: a wake-up, set at start-up; it orders nothing).
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

}  // namespace

void push_free(ChunkMeta* m) {
  set_kind(m, ChunkKind::kFree);
  g_free[m->order].push_front(m);
}

// Puts a clean chunk in the buddy lists, merging it with free buddies.
ROOST_COMMON_TEXT void merge_free(ChunkMeta* m) {
  while (m->order < kMaxOrder) {
    auto [buddy, lower, upper] = buddy_of_kind(m, ChunkKind::kFree);
    if (buddy == nullptr) break;
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

namespace {

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

// granules_out[b] += delta (the lock held: a load and a store, relaxed,
// which the looks read as a hint).
void add_granules_out(std::atomic<uint8_t>& out, int delta) {
  out.store(static_cast<uint8_t>(out.load(std::memory_order_relaxed) + delta),
            std::memory_order_relaxed);
}

// Counts chunk `m`'s granules into (+1) or out of (-1) its blocks'
// granules_out.  Lock held.
ROOST_COMMON_TEXT void count_out(const ChunkMeta* m, int sign) {
  Region* r = region_of(m->base);
  size_t first = (m->base & (config::kRegion - 1)) >> kBlockBits;
  if (m->order < kBlockBits) {
    auto n = static_cast<uint8_t>(1u << (m->order - kMinOrder));
    add_granules_out(r->granules_out[first], sign * n);
    return;
  }
  constexpr uint8_t kWhole = 1u << (kBlockBits - kMinOrder);
  for (size_t b = first; b < first + (size_t{1} << (m->order - kBlockBits)); b++)
    add_granules_out(r->granules_out[b], sign * kWhole);
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
    // (Relaxed: written under the lock this holds.)
    int out =
        region_of(c->base)->granules_out[(c->base & (config::kRegion - 1)) >> kBlockBits].load(
            std::memory_order_relaxed);
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

// Counts a chunk handed out (`clean`: one that must be faulted in).
void note_out(unsigned order, bool clean) {
  note_handout(order, clean);
  g_bytes_out.fetch_add(size_t{1} << order, std::memory_order_relaxed);
  g_chunks_out.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

ROOST_COMMON_TEXT ChunkMeta* take_locked(unsigned order, unsigned max_dirty_order, bool clean,
                                         size_t fill) {
  ChunkMeta* m = take_dirty(order, max_dirty_order, fill);
  bool faulted = m == nullptr;  // clean: its pages must be faulted in
  if (m == nullptr) {
    if (!clean) return nullptr;
    m = pop_free(order);
    if (m == nullptr) m = cut_fresh(order);
    if (m == nullptr) return nullptr;
    m->dirty_pages = 0;  // purged or never touched
    split(m, order, [](ChunkMeta* upper) { push_free(upper); });
  }
  set_kind(m, ChunkKind::kUnused);
  note_out(order, faulted);
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

void lose(ChunkMeta* m) {
  size_t size = size_t{1} << m->order;
  count_out(m, -1);
  g_bytes_out.fetch_sub(size, std::memory_order_relaxed);
  g_chunks_out.fetch_sub(1, std::memory_order_relaxed);
}

ROOST_COMMON_TEXT ChunkMeta* meta_of(uintptr_t addr) {
  return &region_of(addr)->meta[(addr >> config::kGranuleBits) & (kGranulesPerRegion - 1)];
}

ROOST_COMMON_TEXT bool block_handed_out(uintptr_t addr) {
  if (addr >> config::kRegionBits >= kRegionSlots) return false;
  Region* r = region_of(addr);
  if (r == nullptr) return false;
  // (Relaxed: a hint, confirmed from the records; see the header.)
  return r->granules_out[(addr & (config::kRegion - 1)) >> kBlockBits].load(
             std::memory_order_relaxed) == size_t{1} << (kBlockBits - kMinOrder);
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

ChunkMeta* alloc(unsigned order, size_t fill) {
  // Moves only for chunks bigger than a stretch, while the mappings they
  // may make are few enough (config::kMoveMaxReservedBytes).
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
  if (chunks::dirty_bytes() != 0)
    if (ReleaseHook hook = g_release_hook.load(std::memory_order_relaxed)) hook();
}

ROOST_COMMON_TEXT ReleaseHook set_release_hook(ReleaseHook hook) {
  return g_release_hook.exchange(hook, std::memory_order_relaxed);
}

Extent fresh_extent() {
  LockGuard guard(g_lock);
  return {g_fresh_begin, g_fresh_end};
}

ROOST_COMMON_TEXT void note_split_piece() { g_chunks_out.fetch_add(1, std::memory_order_relaxed); }

ROOST_COMMON_TEXT bool has_end_guard(const ChunkMeta* m) {
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
