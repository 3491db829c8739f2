// backend/pagemap.cc — implementation of backend/pagemap.h.
#include "backend/pagemap.h"

#include "platform/os.h"

namespace roost::pagemap {

ChunkMeta** g_entries = nullptr;
uintptr_t g_limit = 0;

bool init() {
  if (g_limit != 0) return true;
  void* p = os::reserve_aligned(kEntries * sizeof(ChunkMeta*), os::page_size());
  if (p == nullptr) return false;
  g_entries = static_cast<ChunkMeta**>(p);
  __atomic_store_n(&g_limit, kEntries, __ATOMIC_RELEASE);
  return true;
}

void set_range(uintptr_t base, size_t bytes, ChunkMeta* meta) {
  uintptr_t first = base >> config::kGranuleBits;
  uintptr_t last = (base + bytes - 1) >> config::kGranuleBits;
  for (uintptr_t i = first; i <= last; i++) __atomic_store_n(&g_entries[i], meta, __ATOMIC_RELAXED);
}

}  // namespace roost::pagemap
