// frontend/slab.cc — the slow operations on one slab (frontend/slab.h).
#include "frontend/slab.h"

#include "backend/chunk_allocator.h"
#include "backend/huge_pages.h"
#include "frontend/ownership.h"
#include "platform/asan.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::slab {

namespace {

// The resident extent (`resident` pages) of `m` cut to its first `keep`
// bytes (whole pages of the OS's: a purge starts on one), when that gives
// back enough; returns the pages left.  Always with MADV_DONTNEED: a chunk
// reads as zero past its dirty extent, and the slab carves the pages given
// back as fresh.
uint32_t trim_resident(ChunkMeta* m, uint32_t resident, size_t keep) {
  size_t page = os::page_size();
  size_t extent = size_t{resident} << config::kMinPageBits;
  if (keep >= extent) return resident;
  keep = bits::align_up(keep, page);  // (kKeepResident returned above: no overflow)
  if (keep >= extent || extent - keep < config::kMinResidentExcess) return resident;
  huge_pages::before_purge(m->base + keep, extent - keep);
  if (!os::purge(reinterpret_cast<void*>(m->base + keep), extent - keep, true)) return resident;
  return static_cast<uint32_t>(keep >> config::kMinPageBits);
}

}  // namespace

ROOST_COMMON_TEXT void start(ChunkMeta* m, unsigned sc, const void* owner, size_t keep_resident) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  // The chunk's dirty extent (read before `carved` overlays it) is what a
  // carve can use without touching fresh pages.
  uint32_t resident = m->dirty_pages;
  uint32_t pages = static_cast<uint32_t>(sizeclass::slab_size(sc) >> config::kMinPageBits);
  ownership::set(m, owner);
  m->free_head = nullptr;
  m->sizeclass = static_cast<uint8_t>(sc);
  set_kind(m, ChunkKind::kSlab);
  m->state = SlabState::kActive;
  m->needed = kActiveHold;  // nothing out
  m->inverse = info.inverse;
  m->obj_size = info.size;
  m->carved = 0;
  note_carve_end(m);
  if (resident > pages) resident = pages;
  resident = trim_resident(m, resident, keep_resident);
  m->touched_pages = static_cast<uint16_t>(resident);
  pagemap::set_range(m->base, sizeclass::slab_size(sc), m);
  // The hardened build's guard page at its end (no object lies there):
  // kept from the chunk's last use where it had one.
  if constexpr (config::kGuardSlabs) chunks::place_end_guard(m);
  // (ASan: none of its objects is the program's yet.)
  asan::poison(reinterpret_cast<void*>(m->base), sizeclass::slab_size(sc));
}

ROOST_COMMON_TEXT void retire(ChunkMeta* m) {
  pagemap::set_range(m->base, sizeclass::slab_size(m->sizeclass), nullptr);
  ownership::set(m, nullptr);
  m->free_head = nullptr;
  m->dirty_pages = m->touched_pages;  // overlays `carved`: read first
  // No class: a BatchIt way may still name this record (RemoteCache keeps
  // its ways' slabs between posts), and the lane of class kCount holds
  // none, so a free that finds the record as something else later never
  // joins that way.
  m->sizeclass = sizeclass::kCount;
}

}  // namespace roost::slab
