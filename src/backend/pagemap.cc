// backend/pagemap.cc — implementation of backend/pagemap.h.
#include "backend/pagemap.h"

#include "platform/os.h"

namespace roost::pagemap {

std::atomic<ChunkMeta*>* g_entries = nullptr;
uintptr_t g_limit = 0;

bool init() {
  if (g_limit != 0) return true;
  void* p = os::reserve_aligned(kEntries * sizeof(ChunkMeta*), os::page_size());
  if (p == nullptr) return false;
  // Fresh pages read as zero: every entry starts null.
  g_entries = static_cast<std::atomic<ChunkMeta*>*>(p);
  std::atomic_ref(g_limit).store(kEntries, std::memory_order_release);
  return true;
}

void set_range(uintptr_t base, size_t bytes, ChunkMeta* meta) {
  uintptr_t first = base >> config::kGranuleBits;
  uintptr_t last = (base + bytes - 1) >> config::kGranuleBits;
  for (uintptr_t i = first; i <= last; i++) g_entries[i].store(meta, std::memory_order_relaxed);
}

}  // namespace roost::pagemap
