// frontend/slab.cc — the slow operations on one slab (frontend/slab.h).
#include "frontend/slab.h"

namespace roost::slab {

void start(ChunkMeta* m, unsigned sc, const void* owner) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  // The chunk's dirty extent (read before `carved` overlays it) is what a
  // carve can use without touching fresh pages.
  uint32_t resident = m->dirty_pages;
  uint32_t pages = static_cast<uint32_t>(sizeclass::slab_size(sc) >> config::kPageBits);
  m->owner = const_cast<void*>(owner);
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
}

FreeObject* take_free(ChunkMeta* m) {
  FreeObject* list = m->free_head;
  m->free_head = nullptr;
  m->state = SlabState::kSleeping;
  m->needed = static_cast<int32_t>(wake_count(m));
  return list;
}

uint32_t carve_count(const ChunkMeta* m) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[m->sizeclass];
  uint32_t left = info.capacity - m->carved;
  return info.carve < left ? info.carve : left;
}

bool carve_touches_fresh(const ChunkMeta* m) {
  size_t end = size_t{m->carved + carve_count(m)} * m->obj_size;
  return end > size_t{m->touched_pages} << config::kPageBits;
}

FreeObject* carve(ChunkMeta* m, FreeObject* list) {
  uint32_t count = carve_count(m);
  uintptr_t first = m->base + static_cast<uintptr_t>(m->carved) * m->obj_size;
  list = freelist::build(first, m->obj_size, count, list);
  // Only a sleeping slab is carved, and its wake count may grow with the
  // objects out: `needed` grows by as much.
  uint32_t before = wake_count(m);
  m->carved = static_cast<uint16_t>(m->carved + count);
  m->needed += static_cast<int32_t>(wake_count(m) - before);
  uint32_t end = static_cast<uint32_t>(
      bits::align_up(size_t{m->carved} * m->obj_size, config::kPageSize) >> config::kPageBits);
  if (end > m->touched_pages) m->touched_pages = static_cast<uint16_t>(end);
  return list;
}

uint32_t wake(ChunkMeta* m) {
  uint32_t returned = wake_count(m) + static_cast<uint32_t>(-m->needed);
  uint32_t in_use = m->carved - returned;
  m->state = SlabState::kAvailable;
  m->needed = static_cast<int32_t>(in_use);
  return in_use;
}

void retire(ChunkMeta* m) {
  pagemap::set_range(m->base, sizeclass::slab_size(m->sizeclass), nullptr);
  m->owner = nullptr;
  m->free_head = nullptr;
  m->dirty_pages = m->touched_pages;  // overlays `carved`: read first
}

}  // namespace roost::slab
