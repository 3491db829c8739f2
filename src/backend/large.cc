// backend/large.cc — implementation of backend/large.h.
#include "backend/large.h"

#include <atomic>

#include "backend/address_space.h"
#include "backend/chunk_allocator.h"
#include "backend/meta_arena.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/os.h"

namespace roost::large {

namespace {

SpinLock g_lock;  // guards the huge-record free list
constexpr ChunkMeta make_freed_record() {
  ChunkMeta m{};
  m.kind = ChunkKind::kFreedLarge;
  return m;
}
constinit ChunkMeta g_freed_record = make_freed_record();
ChunkMeta* g_spare_huge_meta = nullptr;  // records of freed huge objects

// Any thread allocates and frees large objects.
std::atomic<size_t> g_in_use{0};
std::atomic<size_t> g_allocs{0};
std::atomic<size_t> g_frees{0};
std::atomic<size_t> g_huge_bytes{0}, g_huge_objects{0};
std::atomic<size_t> g_huge_peak_bytes{0}, g_huge_peak_objects{0};

void account(ptrdiff_t bytes, size_t allocs, size_t frees) {
  g_in_use.fetch_add(static_cast<size_t>(bytes), std::memory_order_relaxed);
  if (allocs) g_allocs.fetch_add(allocs, std::memory_order_relaxed);
  if (frees) g_frees.fetch_add(frees, std::memory_order_relaxed);
}

void raise_peak(std::atomic<size_t>& peak, size_t now) {
  size_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

// Huge objects apart (statistics: mallinfo's mapped blocks).
void account_huge(ptrdiff_t bytes, ptrdiff_t objects) {
  size_t b = g_huge_bytes.fetch_add(static_cast<size_t>(bytes), std::memory_order_relaxed) +
             static_cast<size_t>(bytes);
  size_t n = g_huge_objects.fetch_add(static_cast<size_t>(objects), std::memory_order_relaxed) +
             static_cast<size_t>(objects);
  raise_peak(g_huge_peak_bytes, b);
  raise_peak(g_huge_peak_objects, n);
}

// The pages a user may have written since the last purge: a cached chunk
// reused for a smaller object still holds the bigger one's bytes.
void note_dirty(ChunkMeta* m, size_t usable) {
  uint32_t pages = static_cast<uint32_t>(usable / config::kPageSize);
  if (pages > m->dirty_pages) m->dirty_pages = pages;
}

void* alloc_huge(size_t usable, size_t align) {
  void* p =
      address_space::reserve_huge(usable, align < config::kGranule ? config::kGranule : align);
  if (p == nullptr) return nullptr;
  ChunkMeta* m;
  {
    LockGuard guard(g_lock);
    m = g_spare_huge_meta;
    if (m != nullptr) g_spare_huge_meta = m->next;
  }
  if (m == nullptr) m = static_cast<ChunkMeta*>(meta_arena::alloc(sizeof(ChunkMeta), 64));
  if (m == nullptr) {
    address_space::release_huge(p, usable);
    return nullptr;
  }
  set_kind(m, ChunkKind::kHuge);
  m->owner = kNoOwner;
  m->base = reinterpret_cast<uintptr_t>(p);
  m->large_size = usable;
  m->next = m->prev = nullptr;
  pagemap::set_range(m->base, 1, m);
  account(static_cast<ptrdiff_t>(usable), 1, 0);
  account_huge(static_cast<ptrdiff_t>(usable), 1);
  return p;
}

}  // namespace

void* alloc(size_t size, size_t align, size_t* dirty) {
  size_t usable = bits::align_up(size, config::kPageSize);
  size_t span = usable > align ? usable : align;
  if (span > config::kRegion) {
    *dirty = 0;  // fresh from mmap
    return alloc_huge(usable, align);
  }
  unsigned order = bits::log2_ceil(span);
  if (order < chunks::kMinOrder) order = chunks::kMinOrder;
  // Recently freed memory first (the backend keeps it resident for a purge
  // delay), so a program that frees and allocates big buffers in turn does
  // not fault them in again.
  ChunkMeta* m = chunks::alloc(order);
  if (m == nullptr) return nullptr;
  // Beyond its dirty extent a backend chunk was never touched or was
  // purged; with MADV_FREE purging it may still hold old bytes.
  if (options::get(options::kPurgeZero) == 0)
    m->dirty_pages = static_cast<uint32_t>((size_t{1} << order) / config::kPageSize);
  *dirty = dirty_extent(m);
  note_dirty(m, usable);
  set_kind(m, ChunkKind::kLarge);
  m->owner = kNoOwner;
  m->large_size = usable;
  pagemap::set_range(m->base, 1, m);
  account(static_cast<ptrdiff_t>(usable), 1, 0);
  return reinterpret_cast<void*>(m->base);
}

const ChunkMeta* freed_record() { return &g_freed_record; }

void free(ChunkMeta* m) {
  pagemap::set_range(m->base, 1, &g_freed_record);
  size_t usable = m->large_size;
  account(-static_cast<ptrdiff_t>(usable), 0, 1);
  if (m->kind == ChunkKind::kHuge) {
    account_huge(-static_cast<ptrdiff_t>(usable), -1);
    // Should the OS refuse to unmap it, the range stays reserved: lost to
    // roost, but nothing else breaks.
    address_space::release_huge(reinterpret_cast<void*>(m->base), usable);
    LockGuard guard(g_lock);
    m->next = g_spare_huge_meta;
    g_spare_huge_meta = m;
    return;
  }
  // dirty_pages bounds what the backend's purge must cover.
  chunks::release(m, dirty_extent(m));
}

bool resize_in_place(ChunkMeta* m, size_t new_size) {
  size_t usable = bits::align_up(new_size, config::kPageSize);
  size_t old = m->large_size;
  if (m->kind == ChunkKind::kHuge) {
    if (usable > old || usable < old / 2) return false;
    if (usable < old && !address_space::shrink_huge(reinterpret_cast<void*>(m->base), old, usable))
      return false;
    account_huge(static_cast<ptrdiff_t>(usable) - static_cast<ptrdiff_t>(old), 0);
  } else {
    size_t chunk = size_t{1} << m->order;
    if (usable > chunk || usable * 4 <= chunk) return false;
    note_dirty(m, usable);
    // A shrink by a megabyte or more gives the tail's pages back now.
    // (Should the OS refuse, the tail keeps its bytes and stays dirty.)
    if (dirty_extent(m) >= usable + (size_t{1} << 20) &&
        os::purge(reinterpret_cast<void*>(m->base + usable), dirty_extent(m) - usable,
                  options::get(options::kPurgeZero) != 0))
      m->dirty_pages = static_cast<uint32_t>(usable / config::kPageSize);
  }
  m->large_size = usable;
  account(static_cast<ptrdiff_t>(usable) - static_cast<ptrdiff_t>(old), 0, 0);
  return true;
}

Counters counters() {
  return Counters{g_in_use.load(std::memory_order_relaxed),
                  g_allocs.load(std::memory_order_relaxed),
                  g_frees.load(std::memory_order_relaxed),
                  g_huge_bytes.load(std::memory_order_relaxed),
                  g_huge_objects.load(std::memory_order_relaxed),
                  g_huge_peak_bytes.load(std::memory_order_relaxed),
                  g_huge_peak_objects.load(std::memory_order_relaxed)};
}

void lock_for_fork() { g_lock.lock(); }
void unlock_after_fork(bool child) { g_lock.unlock_after_fork(child); }

}  // namespace roost::large
