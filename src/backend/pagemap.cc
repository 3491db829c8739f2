// backend/pagemap.cc — implementation of backend/pagemap.h.
#include "backend/pagemap.h"

#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::pagemap {

std::atomic<uintptr_t>* g_entries = nullptr;
uintptr_t g_limit = 0;
constinit ChunkMeta g_stray{};
constinit ChunkMeta* g_stray_key = &g_stray;

namespace {

constexpr size_t kEntryBytes = sizeof(std::atomic<uintptr_t>);
constexpr size_t kSlotEntryBytes = (config::kRegion >> config::kGranuleBits) * kEntryBytes;
static_assert(kSlotEntryBytes % config::kMaxPageSize == 0);

bool g_grows = false;
size_t g_wanted = 0;
uintptr_t g_window_start = config::kWindowBase;

// The window's first slot and the table's place, drawn at random (see
// config.h); the spread below the window is cut under an address-space
// limit, since the table covers it.
void draw_layout(uintptr_t* window_start, uintptr_t* table_at) {
  uint64_t e = os::entropy();
  size_t spread = config::kWindowSpreadSlots;
  uintptr_t base = config::kWindowBase;
  size_t limit = os::address_space_limit();
  if (limit != SIZE_MAX) {
    // The slots whose entries the limit's share pays for.
    size_t affordable = limit / config::kSpreadLimitShare / kSlotEntryBytes;
    if (affordable < spread) spread = affordable;
    uintptr_t low = affordable * config::kRegion;
    if (low < base) base = low > config::kLowestWindowBase ? low : config::kLowestWindowBase;
  }
  *window_start = base + (e % (spread + 1)) * config::kRegion;
  *table_at =
      config::kPagemapBase + ((e >> 32) % config::kPagemapSpread << config::kPagemapStepBits);
}

void publish(std::atomic<uintptr_t>* entries, size_t count) {
  g_entries = entries;
  std::atomic_ref(g_limit).store(count, std::memory_order_release);
}

}  // namespace

ROOST_COMMON_TEXT bool init() {
  if (g_limit != 0) return true;
  // (Memcheck: the window's start is a region's, and so its first block's:
  // no pointer of the program's.)
  memcheck::unaddressable(&g_window_start, sizeof(g_window_start));
  if constexpr (config::kPlaceInWindow) {
    uintptr_t table_at = 0;
    draw_layout(&g_window_start, &table_at);
    // At first the entries up to the end of the window's first slot.
    size_t first_entries = (g_window_start + config::kRegion) >> config::kGranuleBits;
    g_wanted = first_entries * kEntryBytes;
    switch (os::reserve_at(table_at, g_wanted)) {
      case os::Placement::kPlaced:
        // Fresh pages read as zero: every entry starts null.
        g_grows = true;
        publish(reinterpret_cast<std::atomic<uintptr_t>*>(table_at), first_entries);
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
  publish(static_cast<std::atomic<uintptr_t>*>(p), kEntries);
  return true;
}

size_t wanted_bytes() { return g_wanted; }

ROOST_COMMON_TEXT bool cover(uintptr_t end) {
  size_t need = end >> config::kGranuleBits;
  if (need <= g_limit) return true;
  if (!g_grows || need > kEntries) return false;
  // Entries for whole slots: a multiple of the page size.
  uintptr_t at = reinterpret_cast<uintptr_t>(g_entries + g_limit);
  if (os::reserve_at(at, (need - g_limit) * kEntryBytes) != os::Placement::kPlaced) return false;
  std::atomic_ref(g_limit).store(need, std::memory_order_release);
  return true;
}

ROOST_COMMON_TEXT bool grows() { return g_grows; }

ROOST_COMMON_TEXT uintptr_t window_start() { return g_window_start; }

size_t reserved_bytes() {
  return std::atomic_ref(g_limit).load(std::memory_order_relaxed) * kEntryBytes;
}

ROOST_COMMON_TEXT void set_range(uintptr_t base, size_t bytes, ChunkMeta* meta) {
  uintptr_t first = base >> config::kGranuleBits;
  uintptr_t last = (base + bytes - 1) >> config::kGranuleBits;
  uintptr_t entry = encode(meta);
  for (uintptr_t i = first; i <= last; i++) g_entries[i].store(entry, std::memory_order_relaxed);
}

}  // namespace roost::pagemap
