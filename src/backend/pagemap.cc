// backend/pagemap.cc — implementation of backend/pagemap.h.
#include "backend/pagemap.h"

#include "platform/os.h"

namespace roost::pagemap {

std::atomic<ChunkMeta*>* g_entries = nullptr;
uintptr_t g_limit = 0;

namespace {

constexpr size_t kEntryBytes = sizeof(std::atomic<ChunkMeta*>);
// In the window: at first the entries up to the window's first slot.
constexpr size_t kFirstEntries = (config::kWindowBase + config::kRegion) >> config::kGranuleBits;
static_assert((kFirstEntries * kEntryBytes) % config::kPageSize == 0);

bool g_grows = false;
size_t g_wanted = 0;

void publish(std::atomic<ChunkMeta*>* entries, size_t count) {
  g_entries = entries;
  std::atomic_ref(g_limit).store(count, std::memory_order_release);
}

}  // namespace

bool init() {
  if (g_limit != 0) return true;
  if constexpr (config::kPlaceInWindow) {
    g_wanted = kFirstEntries * kEntryBytes;
    switch (os::reserve_at(config::kPagemapBase, g_wanted)) {
      case os::Placement::kPlaced:
        // Fresh pages read as zero: every entry starts null.
        g_grows = true;
        publish(reinterpret_cast<std::atomic<ChunkMeta*>*>(config::kPagemapBase), kFirstEntries);
        return true;
      case os::Placement::kRefused:
        return false;
      case os::Placement::kOccupied:
        break;  // the kernel places everything, and the table covers it all
    }
  }
  g_wanted = kEntries * kEntryBytes;
  void* p = os::reserve_aligned(g_wanted, os::page_size());
  if (p == nullptr) return false;
  publish(static_cast<std::atomic<ChunkMeta*>*>(p), kEntries);
  return true;
}

size_t wanted_bytes() { return g_wanted; }

bool cover(uintptr_t end) {
  size_t need = end >> config::kGranuleBits;
  if (need <= g_limit) return true;
  if (!g_grows || need > kEntries) return false;
  // Entries for whole slots: a multiple of the page size.
  uintptr_t at = reinterpret_cast<uintptr_t>(g_entries + g_limit);
  if (os::reserve_at(at, (need - g_limit) * kEntryBytes) != os::Placement::kPlaced) return false;
  std::atomic_ref(g_limit).store(need, std::memory_order_release);
  return true;
}

bool grows() { return g_grows; }

size_t reserved_bytes() { return std::atomic_ref(g_limit).load(std::memory_order_relaxed) * kEntryBytes; }

void set_range(uintptr_t base, size_t bytes, ChunkMeta* meta) {
  uintptr_t first = base >> config::kGranuleBits;
  uintptr_t last = (base + bytes - 1) >> config::kGranuleBits;
  for (uintptr_t i = first; i <= last; i++) g_entries[i].store(meta, std::memory_order_relaxed);
}

}  // namespace roost::pagemap
