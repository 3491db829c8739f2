// backend/chunk_allocator.cc — implementation of backend/chunk_allocator.h.
#include "backend/chunk_allocator.h"

#include "backend/meta_arena.h"
#include "ds/dlist.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/os.h"

namespace roost::chunks {

namespace {

constexpr size_t kGranulesPerRegion = config::kRegion >> config::kGranuleBits;
constexpr size_t kRegionSlots = size_t{1} << (config::kAddressBits - config::kRegionBits);

struct Region {
  ChunkMeta meta[kGranulesPerRegion];
};

Region* g_regions[kRegionSlots];  // indexed by address >> kRegionBits
SpinLock g_lock;
DList<ChunkMeta> g_free[kMaxOrder + 1];
size_t g_reserved = 0;
size_t g_bytes_out = 0;
size_t g_chunks_out = 0;

ChunkMeta* add_region() {
  void* mem = os::reserve_aligned(config::kRegion, config::kRegion);
  if (mem == nullptr) return nullptr;
  auto* region = static_cast<Region*>(meta_arena::alloc(sizeof(Region), 64));
  if (region == nullptr) {
    os::release(mem, config::kRegion);
    return nullptr;
  }
  uintptr_t base = reinterpret_cast<uintptr_t>(mem);
  __atomic_store_n(&g_regions[base >> config::kRegionBits], region, __ATOMIC_RELEASE);
  __atomic_fetch_add(&g_reserved, config::kRegion, __ATOMIC_RELAXED);
  ChunkMeta* m = &region->meta[0];
  m->base = base;
  m->order = kMaxOrder;
  return m;
}

void push_free(ChunkMeta* m) {
  m->kind = ChunkKind::kFree;
  g_free[m->order].push_front(m);
}

}  // namespace

ChunkMeta* meta_of(uintptr_t addr) {
  Region* r = __atomic_load_n(&g_regions[addr >> config::kRegionBits], __ATOMIC_ACQUIRE);
  return &r->meta[(addr >> config::kGranuleBits) & (kGranulesPerRegion - 1)];
}

ChunkMeta* alloc(unsigned order) {
  LockGuard guard(g_lock);
  ChunkMeta* m = nullptr;
  for (unsigned j = order; j <= kMaxOrder && m == nullptr; j++) m = g_free[j].pop_front();
  if (m == nullptr) m = add_region();
  if (m == nullptr) return nullptr;
  split(m, order, [](ChunkMeta* upper) { push_free(upper); });
  m->kind = ChunkKind::kUnused;
  __atomic_fetch_add(&g_bytes_out, size_t{1} << order, __ATOMIC_RELAXED);
  __atomic_fetch_add(&g_chunks_out, 1, __ATOMIC_RELAXED);
  return m;
}

void release(ChunkMeta* m, size_t dirty_bytes) {
  if (dirty_bytes != 0)
    os::purge(reinterpret_cast<void*>(m->base), dirty_bytes,
              options::get(options::kPurgeZero) != 0);
  LockGuard guard(g_lock);
  __atomic_fetch_sub(&g_bytes_out, size_t{1} << m->order, __ATOMIC_RELAXED);
  __atomic_fetch_sub(&g_chunks_out, 1, __ATOMIC_RELAXED);
  while (m->order < kMaxOrder) {
    uintptr_t buddy_base = m->base ^ (uintptr_t{1} << m->order);
    ChunkMeta* buddy = meta_of(buddy_base);
    if (buddy->kind != ChunkKind::kFree || buddy->order != m->order) break;
    g_free[buddy->order].remove(buddy);
    ChunkMeta* lower = buddy_base < m->base ? buddy : m;
    ChunkMeta* upper = buddy_base < m->base ? m : buddy;
    upper->kind = ChunkKind::kUnused;
    lower->order++;
    m = lower;
  }
  push_free(m);
}

void note_split_piece() { __atomic_fetch_add(&g_chunks_out, 1, __ATOMIC_RELAXED); }

size_t reserved_bytes() { return __atomic_load_n(&g_reserved, __ATOMIC_RELAXED); }
size_t bytes_out() { return __atomic_load_n(&g_bytes_out, __ATOMIC_RELAXED); }
size_t chunks_out() { return __atomic_load_n(&g_chunks_out, __ATOMIC_RELAXED); }

void lock_for_fork() { g_lock.lock(); }
void unlock_after_fork(bool child) { g_lock.unlock_after_fork(child); }

}  // namespace roost::chunks
