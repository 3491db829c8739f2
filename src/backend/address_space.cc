// backend/address_space.cc — implementation of backend/address_space.h.
#include "backend/address_space.h"

#include <atomic>

#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/spinlock.h"
#include "platform/asan.h"
#include "platform/error.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::address_space {

namespace {

constexpr unsigned kSlotBits = config::kRegionBits;
constexpr size_t kSlot = size_t{1} << kSlotBits;
// The window ends where the pagemap's own range begins.
constexpr uintptr_t kEndSlot = config::kPagemapBase >> kSlotBits;

enum class Slot : uint8_t {
  kFree = 0,  // nothing of roost's, and nothing else seen there
  kRegions,   // regions (which are never given back)
  kHuge,      // part of a huge object's range
  kForeign,   // something else is mapped there
};

SpinLock g_lock;
Slot g_slots[kEndSlot];
bool g_any_region = false;    // has a region ever been placed?
uintptr_t g_region_slot = 0;  // the slot regions go in now (0: none yet)
size_t g_region_used = 0;     // its bytes before the next region

bool in_window() { return pagemap::grows(); }

// Regions the kernel placed (outside the window), for ranges(): the first
// kTrackedRegions of them.
constexpr size_t kTrackedRegions = 64;
os::AddressRange g_placed[kTrackedRegions];
size_t g_placed_count = 0;

// The first run of `count` free slots whose first is a multiple of
// `align_slots`; 0 if there is none.  Lock held.
uintptr_t find_free_run(size_t count, size_t align_slots) {
  uintptr_t first = pagemap::window_start() >> kSlotBits;
  for (uintptr_t s = bits::align_up(first, align_slots); s + count <= kEndSlot; s += align_slots) {
    size_t i = 0;
    while (i < count && g_slots[s + i] == Slot::kFree) i++;
    if (i == count) return s;
  }
  return 0;
}

void mark(uintptr_t first, size_t count, Slot state) {
  for (size_t i = 0; i < count; i++) g_slots[first + i] = state;
}

// Slots from the one holding `p` to the one holding its last byte.
size_t slots_spanned(uintptr_t p, size_t size) {
  return ((p + size - 1) >> kSlotBits) - (p >> kSlotBits) + 1;
}

// A region of `size` bytes in the window: after the last one in the current
// slot, else at the start of a fresh slot.  Lock held.
void* place_region(size_t size) {
  for (;;) {
    if (g_region_slot != 0) {
      size_t offset = bits::align_up(g_region_used, size);
      if (offset + size <= kSlot) {
        uintptr_t at = (g_region_slot << kSlotBits) + offset;
        switch (os::reserve_at(at, size)) {
          case os::Placement::kPlaced:
            g_region_used = offset + size;
            return reinterpret_cast<void*>(at);
          case os::Placement::kRefused:
            return nullptr;
          case os::Placement::kOccupied:
            break;  // something else moved in: leave this slot
        }
      }
      if (g_region_used == 0) g_slots[g_region_slot] = Slot::kForeign;
    }
    uintptr_t s = find_free_run(1, 1);
    if (s == 0 || !pagemap::cover((s + 1) << kSlotBits)) return nullptr;
    g_slots[s] = Slot::kRegions;
    g_region_slot = s;
    g_region_used = 0;
  }
}

void* place_huge(size_t size, size_t align) {
  size_t count = (size + kSlot - 1) >> kSlotBits;
  size_t align_slots = align > kSlot ? align >> kSlotBits : 1;
  for (;;) {
    uintptr_t s = find_free_run(count, align_slots);
    if (s == 0 || !pagemap::cover((s + count) << kSlotBits)) return nullptr;
    switch (os::reserve_at(s << kSlotBits, size)) {
      case os::Placement::kPlaced:
        mark(s, count, Slot::kHuge);
        return reinterpret_cast<void*>(s << kSlotBits);
      case os::Placement::kRefused:
        return nullptr;
      case os::Placement::kOccupied:
        // Somewhere in the run: the next search starts past its first slot.
        g_slots[s] = Slot::kForeign;
        break;
    }
  }
}

// The biggest region order worth asking for: a share of the address-space
// limit, if there is one, and at least `min_order`.
unsigned preferred_order(unsigned min_order) {
  unsigned order = config::kRegionBits;
  size_t limit = os::address_space_limit();
  if (limit != SIZE_MAX) {
    size_t share = limit / config::kRegionLimitShare;
    unsigned cap = share > config::kGranule ? bits::log2_floor(share) : config::kGranuleBits;
    if (cap < order) order = cap;
  }
  return order < min_order ? min_order : order;
}

// The limit as scarce() and huge_above() read it: kUnread until the first
// call (the value every call computes is the same, so a race is harmless).
constexpr size_t kUnread = 0;
std::atomic<size_t> g_huge_above{kUnread};

size_t read_huge_above() {
  size_t above = g_huge_above.load(std::memory_order_relaxed);
  if (above == kUnread) {
    above = size_t{1} << preferred_order(config::kGranuleBits);
    g_huge_above.store(above, std::memory_order_relaxed);
  }
  return above;
}

}  // namespace

ROOST_COMMON_TEXT bool scarce() { return read_huge_above() < config::kRegion; }

ROOST_COMMON_TEXT size_t huge_above() { return read_huge_above(); }

ROOST_COMMON_TEXT void* reserve_region(unsigned min_order, unsigned* order) {
  LockGuard guard(g_lock);
  // Smaller and smaller while the OS refuses: under a limit roost keeps
  // working until the limit truly leaves no room for what is asked.
  for (unsigned o = preferred_order(min_order);; o--) {
    size_t size = size_t{1} << o;
    void* p = in_window() ? place_region(size) : os::reserve_aligned(size, size);
    if (p != nullptr && !in_window() && g_placed_count < kTrackedRegions) {
      auto at = reinterpret_cast<uintptr_t>(p);
      g_placed[g_placed_count++] = {at, at + size};
    }
    if (p != nullptr) {
      memcheck::unaddressable(p, size);  // (memcheck: what is not handed out)
      *order = o;
      g_any_region = true;
      return p;
    }
    if (o == min_order) {
      if (!g_any_region) report_cannot_start("its first region", size);
      return nullptr;
    }
  }
}

void release_region(void* p, unsigned order) {
  // The window's place is not reused: regions are never given back, so
  // this one just leaves a gap.
  os::release(p, size_t{1} << order);
}

void* reserve_huge(size_t size, size_t align) {
  void* p;
  if (!in_window()) {
    p = os::reserve_aligned(size, align);
  } else {
    LockGuard guard(g_lock);
    p = place_huge(size, align);
  }
  if (p != nullptr) memcheck::unaddressable(p, size);
  return p;
}

bool release_huge(void* p, size_t size) {
  // (ASan: whatever is mapped here next is not roost's to have poisoned.)
  asan::unpoison(p, size);
  if (!os::release(p, size)) return false;
  if (in_window()) {
    uintptr_t at = reinterpret_cast<uintptr_t>(p);
    LockGuard guard(g_lock);
    mark(at >> kSlotBits, slots_spanned(at, size), Slot::kFree);
  }
  return true;
}

bool shrink_huge(void* p, size_t size, size_t keep) {
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  asan::unpoison(reinterpret_cast<void*>(at + keep), size - keep);  // (as release_huge)
  if (!os::release(reinterpret_cast<void*>(at + keep), size - keep)) return false;
  if (in_window()) {
    // The slots past the one holding the last byte kept are free again.
    size_t before = slots_spanned(at, size), after = slots_spanned(at, keep);
    LockGuard guard(g_lock);
    mark((at >> kSlotBits) + after, before - after, Slot::kFree);
  }
  return true;
}

void report_cannot_start(const char* what, size_t bytes) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true, std::memory_order_relaxed)) return;
  constexpr size_t kKiB = 1024, kMiB = kKiB * 1024;
  err::Line line;
  line.str("roost: cannot start: the OS refused ");
  if (bytes >= kMiB)
    line.dec(bits::align_up(bytes, kMiB) / kMiB).str(" MiB");
  else
    line.dec(bits::align_up(bytes, kKiB) / kKiB).str(" KiB");
  line.str(" of address space for ").str(what).str("; ");
  size_t limit = os::address_space_limit();
  if (limit == SIZE_MAX) {
    line.str("no address-space limit is set");
  } else {
    line.str("the address-space limit (ulimit -v) is ").dec(limit / kMiB).str(" MiB");
    if (size_t used = os::address_space_used()) line.str(", ").dec(used / kMiB).str(" MiB in use");
  }
  line.str(": allocations fail with ENOMEM\n");
  line.emit();
}

size_t ranges(os::AddressRange* out, size_t max) {
  if (max == 0) return 0;
  size_t n = 0;
  auto add = [out, max, &n](uintptr_t begin, uintptr_t end) {
    if (n != 0 && (out[n - 1].end == begin || n == max)) {
      out[n - 1].end = end;  // adjacent, or no room: the last one grows
    } else {
      out[n++] = {begin, end};
    }
  };
  LockGuard guard(g_lock);
  if (in_window()) {
    for (uintptr_t s = pagemap::window_start() >> kSlotBits; s < kEndSlot; s++)
      if (g_slots[s] == Slot::kRegions || g_slots[s] == Slot::kHuge)
        add(s << kSlotBits, (s + 1) << kSlotBits);
  } else {
    // In the order reserved: sorted here (a few entries).
    os::AddressRange sorted[kTrackedRegions];
    size_t count = g_placed_count;
    for (size_t i = 0; i < count; i++) {
      size_t j = i;
      for (; j > 0 && sorted[j - 1].begin > g_placed[i].begin; j--) sorted[j] = sorted[j - 1];
      sorted[j] = g_placed[i];
    }
    for (size_t i = 0; i < count; i++) add(sorted[i].begin, sorted[i].end);
  }
  return n;
}

bool heap_mapped_bytes(os::MappedBytes* out) {
  os::AddressRange found[64];
  size_t n = ranges(found, 64);
  if (n == 0) {
    *out = {0, 0};
    return true;
  }
  return os::mapped_bytes(found, n, out);
}

void lock_for_fork() { g_lock.lock(); }
void unlock_after_fork(bool child) { g_lock.unlock_after_fork(child); }

}  // namespace roost::address_space
