// backend/huge_pages.cc — implementation of backend/huge_pages.h.
//
// The advice (`always`) is a property of the kernel's mappings, so each
// change splits or merges them and costs a system call: a region is advised
// whole, once, as it is reserved, and a huge object's inside as it is
// mapped; nothing takes it off but a huge object's shrink (its new last
// block).
//
// The dense state (`dense`) is a byte per block in the region tables
// (chunks::block_state_of): the streak of looks in a row that found the
// block dense, whether it is collapsed, and how often it was collapsed and
// split again.  The service's look writes streaks and sets the collapsed
// bit; a purge (any thread, on a slow path) clears it: atomic bytes, RMW.
// Whether a block is in use is read from the chunk records without the
// backend's lock (they may be changing hands: a wrong answer costs a
// collapse of a block about to be purged, or a missed one, never a byte),
// and confirmed by mincore.  A collapse must not map again what a purge
// just gave back (MADV_COLLAPSE fills pages that are not mapped): the
// collapser names its block (g_collapsing), fences, and reads the block's
// records once more; a purge of the backend's takes its chunks off their
// lists (kind kUnused) under its lock, fences (purge_and_merge), and asks
// before_purge(), which says no for the block being collapsed (the chunk
// stays dirty, for a later purge).  One of the two sees the other, and
// neither waits: a program thread's purge never waits for a collapse.
#include "backend/huge_pages.h"

#include <atomic>

#include "backend/chunk_allocator.h"
#include "ds/spinlock.h"
#include "options.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::huge_pages {

namespace {

constexpr unsigned kBlockBits = chunks::kBlockBits;

// The kernel's THP mode, read once: -1 not yet, 1 `madvise`, 0 another.
std::atomic<int> g_kernel_mode{-1};
std::atomic<size_t> g_calls{0};

bool kernel_gives() {
  int mode = g_kernel_mode.load(std::memory_order_relaxed);
  if (mode < 0) {
    mode = os::huge_pages_on_advice() ? 1 : 0;
    g_kernel_mode.store(mode, std::memory_order_relaxed);
  }
  return mode == 1;
}

// The blocks [first, last] that [base, base + size) overlaps.
struct Blocks {
  uintptr_t first, last;
};
Blocks blocks_of(uintptr_t base, size_t size) {
  return Blocks{base >> kBlockBits, (base + size - 1) >> kBlockBits};
}

// Gives blocks [from, to) the advice (`on`) or takes it off, and counts
// the call; false if the OS refused (the process's map count, say).
bool advise(uintptr_t from, uintptr_t to, bool on) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return os::advise_huge_pages(reinterpret_cast<void*>(from << kBlockBits),
                               (to - from) << kBlockBits, on);
}

}  // namespace

void fit_mapped(uintptr_t base, size_t size, bool shrunk) {
  if (!active()) return;
  Blocks span = blocks_of(base, size);
  // A huge object's mapping is its own, and the bits (which cover regions
  // only) are not kept for it: a fresh mapping has no advice, and one cut
  // short has it inside, where its new last block may now be.
  if (shrunk)
    advise(span.last, span.last + 1, false);
  else if (span.last - span.first >= 2)
    advise(span.first + 1, span.last, true);
}

ROOST_COMMON_TEXT void fit_region(uintptr_t base, size_t size) {
  if (!active()) return;
  g_calls.fetch_add(1, std::memory_order_relaxed);
  os::advise_huge_pages(reinterpret_cast<void*>(base), size, true);
}

ROOST_COMMON_TEXT bool active() {
  if (options::get(options::kHugePages) != options::kHugeAlways) return false;
  return kernel_gives();
}

size_t calls() { return g_calls.load(std::memory_order_relaxed); }

// ---- `dense` ----

namespace {

constexpr size_t kBlock = size_t{1} << kBlockBits;

// A block's state byte: the streak of dense looks (0..15), collapsed, the
// times it was collapsed and split again (0..3), and filled: a collapse
// mapped its missing pages (zeros) since it was last purged whole, so the
// pages of a chunk in it past the chunk's dirty extent may be resident.
constexpr uint8_t kStreakMask = 0x0f;
constexpr uint8_t kCollapsed = 0x10;
constexpr unsigned kSplitsShift = 5;
constexpr uint8_t kSplitsMask = 0x60;
constexpr uint8_t kFilled = 0x80;

unsigned splits_of(uint8_t s) { return (s & kSplitsMask) >> kSplitsShift; }
// The streak a block needs: two looks, twice as many per split (15 at most).
unsigned streak_needed(uint8_t s) {
  unsigned need = 2u << splits_of(s);
  return need < kStreakMask ? need : kStreakMask;
}
uint8_t with_split(uint8_t s) {
  unsigned splits = splits_of(s);
  if (splits < 3) splits++;
  return static_cast<uint8_t>((s & ~kSplitsMask) | (splits << kSplitsShift));
}

// Counters (relaxed: statistics; the looks' are written by the looker, under g_look_lock).
std::atomic<uint64_t> g_tried{0}, g_done{0}, g_refused{0};
std::atomic<int64_t> g_blocks{0};  // blocks collapsed now
// Blocks with kFilled set (relaxed: a hint that lets filled_extent() skip
// the tables; a block filled while it is read out is still handed out, and
// its chunk's release comes after the collapse).
std::atomic<int64_t> g_filled{0};
std::atomic<size_t> g_look_syscalls{0};

// The kernel refused MADV_COLLAPSE for good (EINVAL, EPERM): `dense` is off.
std::atomic<bool> g_unsupported{false};
// The looks stopped (look() returned UINT64_MAX); wants_look() starts them.
std::atomic<bool> g_parked{true};
std::atomic<size_t> g_floor{config::kDenseHeapFloor};
std::atomic<os::Collapse (*)(void*, size_t)> g_collapse{nullptr};
// The block the look is collapsing now (its address; 0: none).
std::atomic<uintptr_t> g_collapsing{0};

// The looker's own (under g_look_lock: the service, or a test).
SpinLock g_look_lock;
uint64_t g_next_look = 0;
uintptr_t g_cursor = 0;  // the block the next look starts at (an address)
size_t g_out_seen = 0;   // bytes_out() at the last look
unsigned g_idle_looks = 0;

// Is every granule of the block at `b` in a chunk handed out for slabs or
// a large object?  Read from the records without the lock (see the top).
bool in_use(uintptr_t b) {
  // (Most blocks are not: the per-block count says so without a record.)
  if (!chunks::block_handed_out(b)) return false;
  auto used = [](const ChunkMeta* m) {
    ChunkKind k = kind_of(m);
    return k == ChunkKind::kSlab || k == ChunkKind::kLarge;
  };
  // A chunk of 2 MiB or more holding it: its head, the outermost record
  // whose order says so (inner records may keep stale kinds).
  for (unsigned o = chunks::kMaxOrder; o >= kBlockBits; o--) {
    uintptr_t head = b & ~((uintptr_t{1} << o) - 1);
    const ChunkMeta* m = chunks::meta_of(head);
    if (order_of(m) != o || kind_of(m) == ChunkKind::kUnused) continue;
    return used(m);
  }
  // Smaller chunks: their heads, one after another.
  for (uintptr_t at = b; at < b + kBlock;) {
    const ChunkMeta* m = chunks::meta_of(at);
    unsigned o = order_of(m);
    if (o < chunks::kMinOrder || o >= kBlockBits || (at & ((uintptr_t{1} << o) - 1)) != 0 ||
        !used(m))
      return false;
    at += uintptr_t{1} << o;
  }
  return true;
}

// Are the block's pages resident, but config::kDenseMissingPages?
bool resident(uintptr_t b) {
  g_look_syscalls.fetch_add(1, std::memory_order_relaxed);
  size_t pages = kBlock / os::page_size();
  size_t missing = config::kDenseMissingPages * config::kMinPageSize / os::page_size();
  return os::resident_pages(reinterpret_cast<void*>(b), kBlock) + missing >= pages;
}

// Sets the block's state from `from` to `to` where it still reads `from`.
bool update(std::atomic<uint8_t>* state, uint8_t from, uint8_t to) {
  return state->compare_exchange_strong(from, to, std::memory_order_relaxed);
}

enum class Tried { kNot, kDone, kRefused, kOff };

// Collapses the block at `b` (state byte `state`, read as `s`) once more
// found in use and resident.
Tried collapse(uintptr_t b, std::atomic<uint8_t>* state, uint8_t s) {
  // Named, then the records read again: the handshake with purges (above).
  g_collapsing.store(b, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!in_use(b) || !resident(b)) {
    g_collapsing.store(0, std::memory_order_release);
    update(state, s, static_cast<uint8_t>(s & ~kStreakMask));
    return Tried::kNot;
  }
  g_tried.fetch_add(1, std::memory_order_relaxed);
  g_look_syscalls.fetch_add(1, std::memory_order_relaxed);
  auto fn = g_collapse.load(std::memory_order_relaxed);
  os::Collapse c = fn != nullptr ? fn(reinterpret_cast<void*>(b), kBlock)
                                 : os::collapse_huge_page(reinterpret_cast<void*>(b), kBlock);
  Tried result = Tried::kDone;
  if (c == os::Collapse::kDone) {
    // Filled whatever happens to the streak below: the kernel mapped the
    // block's missing pages, which some chunk's record may count as clean.
    if ((state->fetch_or(kFilled, std::memory_order_relaxed) & kFilled) == 0)
      g_filled.fetch_add(1, std::memory_order_relaxed);
    s |= kFilled;
    // (A purge since the read above cleared the streak: the CAS fails, and
    // the block is not held as collapsed; the kernel has it as it is.)
    if (update(state, s, static_cast<uint8_t>((s & (kSplitsMask | kFilled)) | kCollapsed))) {
      g_blocks.fetch_add(1, std::memory_order_relaxed);
    }
    g_done.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    // No huge page to be had now: tried again after a longer streak.
    update(state, s, with_split(static_cast<uint8_t>(s & ~kStreakMask)));
    result = Tried::kRefused;
    if (c == os::Collapse::kUnsupported) {
      g_unsupported.store(true, std::memory_order_relaxed);
      result = Tried::kOff;
    }
  }
  g_collapsing.store(0, std::memory_order_release);
  return result;
}

// The look proper (g_look_lock held).  Returns whether it found anything to
// do: a streak begun or going on, a block collapsed.
bool look_locked() {
  chunks::Slots slots = chunks::slots();
  if (slots.first >= slots.end) return false;
  uintptr_t begin = slots.first << config::kRegionBits, end = slots.end << config::kRegionBits;
  if (g_cursor < begin || g_cursor >= end) g_cursor = begin;
  bool busy = false;
  unsigned collapses = 0;
  uintptr_t b = g_cursor;
  // (The budget counts the blocks in use, which cost a mincore each; a
  // block that is not costs a few record reads.)
  for (unsigned n = 0; n < config::kDenseBlocksPerLook;) {
    std::atomic<uint8_t>* state = chunks::block_state_of(b);
    if (state == nullptr) {
      // A slot without a table: skip it.
      b = (b | (config::kRegion - 1)) + 1;
    } else {
      uint8_t s = state->load(std::memory_order_relaxed);
      if ((s & kCollapsed) == 0) {
        bool used = in_use(b);
        if (used) n++;
        if (!used || !resident(b)) {
          if ((s & kStreakMask) != 0) update(state, s, static_cast<uint8_t>(s & ~kStreakMask));
        } else {
          busy = true;
          unsigned streak = (s & kStreakMask) + 1u;
          if (streak > kStreakMask) streak = kStreakMask;
          uint8_t next = static_cast<uint8_t>((s & ~kStreakMask) | streak);
          if (update(state, s, next) && streak >= streak_needed(next) &&
              collapses < config::kMaxCollapsesPerLook) {
            collapses++;
            if (collapse(b, state, next) == Tried::kOff) break;
          }
        }
      }
      b += kBlock;
    }
    if (b >= end) b = begin;
    if (b == g_cursor) break;  // all of it seen
  }
  g_cursor = b;
  return busy;
}

}  // namespace

ROOST_COMMON_TEXT bool dense() {
  return options::get(options::kHugePages) == options::kHugeDense &&
         !g_unsupported.load(std::memory_order_relaxed) && kernel_gives();
}

ROOST_COMMON_TEXT uint64_t look(uint64_t now) {
  if (!g_look_lock.try_lock()) return now + config::kDenseLookNs;
  uint64_t next = UINT64_MAX;
  // (The floor first: a small program does not even read the kernel's mode.)
  if (chunks::bytes_out() < g_floor.load(std::memory_order_relaxed) || !dense()) {
    g_parked.store(true, std::memory_order_relaxed);
  } else if (now < g_next_look) {
    next = g_next_look;
  } else {
    size_t out = chunks::bytes_out();
    bool busy = look_locked() || out > g_out_seen;
    g_out_seen = out;
    g_idle_looks = busy ? 0 : g_idle_looks + 1;
    if (!dense() || g_idle_looks >= config::kDenseIdleLooks) {
      g_idle_looks = 0;
      g_parked.store(true, std::memory_order_relaxed);
    } else {
      uint64_t delay = chunks::purge_delay_now_ns();
      g_next_look = now + (delay > config::kDenseLookNs ? delay : config::kDenseLookNs);
      next = g_next_look;
    }
  }
  g_look_lock.unlock();
  return next;
}

ROOST_COMMON_TEXT bool wants_look() {
  if (!g_parked.load(std::memory_order_relaxed)) return false;
  if (options::get(options::kHugePages) != options::kHugeDense ||
      g_unsupported.load(std::memory_order_relaxed) ||
      chunks::bytes_out() < g_floor.load(std::memory_order_relaxed))
    return false;
  return g_parked.exchange(false, std::memory_order_relaxed);
}

ROOST_COMMON_TEXT bool look_pending() { return !g_parked.load(std::memory_order_relaxed); }

ROOST_COMMON_TEXT bool before_purge(uintptr_t base, size_t size) {
  if (size == 0) return true;
  // (seq_cst: after the caller's fence, the handshake above.)
  uintptr_t busy = g_collapsing.load(std::memory_order_seq_cst);
  if (busy != 0 && busy < base + size && base < busy + kBlock) return false;
  if (g_blocks.load(std::memory_order_relaxed) == 0 &&
      g_filled.load(std::memory_order_relaxed) == 0)
    return true;
  Blocks span = blocks_of(base, size);
  for (uintptr_t blk = span.first; blk <= span.last; blk++) {
    uintptr_t b = blk << kBlockBits;
    bool whole = base <= b && base + size >= b + kBlock;
    std::atomic<uint8_t>* state = chunks::block_state_of(b);
    if (state == nullptr) continue;
    uint8_t s = state->load(std::memory_order_relaxed);
    // A collapsed block loses that state (split again where the purge
    // covers part of it); one purged whole is no longer filled.
    const uint8_t clears = whole ? kCollapsed | kFilled : kCollapsed;
    while ((s & clears) != 0) {
      uint8_t to = static_cast<uint8_t>(s & ~(clears | kStreakMask));
      if ((s & kCollapsed) != 0 && !whole) to = with_split(to);
      if (state->compare_exchange_weak(s, to, std::memory_order_relaxed)) {
        if ((s & kCollapsed) != 0) g_blocks.fetch_sub(1, std::memory_order_relaxed);
        if ((s & clears & kFilled) != 0) g_filled.fetch_sub(1, std::memory_order_relaxed);
        break;
      }
    }
  }
  return true;
}

void await_collapse(uintptr_t base, size_t size) {
  // (Acquire: pairs with the collapser's release as it lets go of the block.)
  for (;;) {
    uintptr_t busy = g_collapsing.load(std::memory_order_acquire);
    if (busy == 0 || busy >= base + size || base >= busy + kBlock) return;
    os::yield();
  }
}

ROOST_COMMON_TEXT size_t filled_extent(uintptr_t base, size_t size, size_t dirty) {
  if (dirty >= size || g_filled.load(std::memory_order_relaxed) == 0) return dirty;
  // The last filled block the chunk's clean part overlaps bounds it.
  Blocks span = blocks_of(base + dirty, size - dirty);
  for (uintptr_t blk = span.last + 1; blk-- > span.first;) {
    std::atomic<uint8_t>* state = chunks::block_state_of(blk << kBlockBits);
    if (state == nullptr || (state->load(std::memory_order_relaxed) & kFilled) == 0) continue;
    size_t end = ((blk + 1) << kBlockBits) - base;
    return end < size ? end : size;
  }
  return dirty;
}

ROOST_COMMON_TEXT void cleaned(uintptr_t base, size_t size) {
  if (g_filled.load(std::memory_order_relaxed) == 0) return;
  for (uintptr_t b = base; b < base + size; b += kBlock) {
    std::atomic<uint8_t>* state = chunks::block_state_of(b);
    if (state == nullptr) return;
    if ((state->load(std::memory_order_relaxed) & kFilled) != 0 &&
        (state->fetch_and(static_cast<uint8_t>(~kFilled), std::memory_order_relaxed) & kFilled) !=
            0)
      g_filled.fetch_sub(1, std::memory_order_relaxed);
  }
}

void moved(uintptr_t from, uintptr_t to, size_t bytes) {
  if (g_blocks.load(std::memory_order_relaxed) == 0 &&
      g_filled.load(std::memory_order_relaxed) == 0)
    return;
  for (size_t off = 0; off + kBlock <= bytes; off += kBlock) {
    std::atomic<uint8_t>* src = chunks::block_state_of(from + off);
    std::atomic<uint8_t>* dst = chunks::block_state_of(to + off);
    if (src == nullptr || dst == nullptr) continue;
    // The source's pages are gone: it is neither collapsed nor filled.
    uint8_t was = src->fetch_and(static_cast<uint8_t>(~(kCollapsed | kFilled | kStreakMask)),
                                 std::memory_order_relaxed);
    // The destination's own pages were discarded: it holds the source's.
    const uint8_t carried = kCollapsed | kFilled;
    uint8_t d = dst->load(std::memory_order_relaxed);
    while (!dst->compare_exchange_weak(d, static_cast<uint8_t>((d & kSplitsMask) | (was & carried)),
                                       std::memory_order_relaxed)) {
    }
    // The source's state went to the destination: one fewer of each that
    // the destination held itself.
    if ((d & kCollapsed) != 0) g_blocks.fetch_sub(1, std::memory_order_relaxed);
    if ((d & kFilled) != 0) g_filled.fetch_sub(1, std::memory_order_relaxed);
  }
}

Counts counts() {
  int64_t blocks = g_blocks.load(std::memory_order_relaxed);
  return Counts{g_tried.load(std::memory_order_relaxed), g_done.load(std::memory_order_relaxed),
                g_refused.load(std::memory_order_relaxed),
                blocks > 0 ? static_cast<uint64_t>(blocks) : 0};
}

bool collapsed(uintptr_t addr) {
  std::atomic<uint8_t>* state = chunks::block_state_of(addr);
  return state != nullptr && (state->load(std::memory_order_relaxed) & kCollapsed) != 0;
}

bool filled(uintptr_t addr) {
  std::atomic<uint8_t>* state = chunks::block_state_of(addr);
  return state != nullptr && (state->load(std::memory_order_relaxed) & kFilled) != 0;
}

namespace testing {
void set_collapse(os::Collapse (*fn)(void*, size_t)) {
  g_collapse.store(fn, std::memory_order_relaxed);
}
void set_heap_floor(size_t bytes) { g_floor.store(bytes, std::memory_order_relaxed); }
void reset() {
  LockGuard guard(g_look_lock);
  g_unsupported.store(false, std::memory_order_relaxed);
  g_parked.store(false, std::memory_order_relaxed);
  // (An hour from now on the real clock: the service's own looks wait,
  // while a test's, on a clock of its own, go on.)
  g_next_look = os::now_ns() + uint64_t{3600} * 1000 * 1000 * 1000;
  g_idle_looks = 0;
  g_cursor = 0;
  chunks::Slots slots = chunks::slots();
  for (size_t slot = slots.first; slot < slots.end; slot++)
    for (uintptr_t b = slot << config::kRegionBits; b < (slot + 1) << config::kRegionBits;
         b += kBlock)
      if (std::atomic<uint8_t>* state = chunks::block_state_of(b))
        state->fetch_and(kCollapsed | kFilled, std::memory_order_relaxed);
      else
        break;
}
size_t look_syscalls() { return g_look_syscalls.load(std::memory_order_relaxed); }
}  // namespace testing

}  // namespace roost::huge_pages
