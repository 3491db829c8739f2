// backend/huge_pages.cc — implementation of backend/huge_pages.h.
//
// The advice is a property of the kernel's mappings, so each change splits
// or merges them and costs a system call: the bits (one per block, in the
// region tables) say which blocks have it, and a call is made only for
// blocks whose advice must change.  The blocks between a large object's
// first and last lie wholly in its chunk, so only their holder sets their
// bits; first and last blocks, and blocks that hold slabs, may be shared by
// several chunks, and are only ever cleared (twice is harmless).
#include "backend/huge_pages.h"

#include <atomic>

#include "backend/chunk_allocator.h"
#include "options.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::huge_pages {

namespace {

constexpr unsigned kBlockBits = chunks::kBlockBits;

// The kernel's THP mode, read once: -1 not yet, 1 `madvise`, 0 another.
std::atomic<int> g_kernel_mode{-1};
std::atomic<size_t> g_calls{0};

uint64_t bit_of(uintptr_t block) { return uint64_t{1} << (block & 63); }

// The blocks [first, last] that [base, base + size) overlaps.
struct Blocks {
  uintptr_t first, last;
};
Blocks blocks_of(uintptr_t base, size_t size) {
  return Blocks{base >> kBlockBits, (base + size - 1) >> kBlockBits};
}

bool has_advice(uintptr_t block) {
  return (chunks::block_bits_of(block << kBlockBits)->load(std::memory_order_relaxed) &
          bit_of(block)) != 0;
}

// Gives blocks [from, to) the advice (`on`) or takes it off, and counts
// the call; false if the OS refused (the process's map count, say).
bool advise(uintptr_t from, uintptr_t to, bool on) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return os::advise_huge_pages(reinterpret_cast<void*>(from << kBlockBits),
                               (to - from) << kBlockBits, on);
}

// advise(), and the blocks' bits record it (when the OS refuses, they keep
// what the blocks have).
void change(uintptr_t from, uintptr_t to, bool on) {
  if (!advise(from, to, on)) return;
  for (uintptr_t b = from; b < to; b++) {
    std::atomic<uint64_t>* word = chunks::block_bits_of(b << kBlockBits);
    if (on)
      word->fetch_or(bit_of(b), std::memory_order_relaxed);
    else
      word->fetch_and(~bit_of(b), std::memory_order_relaxed);
  }
}

// Brings blocks [first, last] to the advice want(block) names (true: the
// advice), one call per run of blocks that must change the same way.
template <typename Want>
void bring(uintptr_t first, uintptr_t last, Want&& want) {
  uintptr_t run = 0;
  bool run_on = false, in_run = false;
  for (uintptr_t b = first; b <= last; b++) {
    bool on = want(b);
    bool differs = has_advice(b) != on;
    if (in_run && (!differs || on != run_on)) {
      change(run, b, run_on);
      in_run = false;
    }
    if (differs && !in_run) {
      run = b;
      run_on = on;
      in_run = true;
    }
  }
  if (in_run) change(run, last + 1, run_on);
}

}  // namespace

ROOST_COMMON_TEXT void fit_large(uintptr_t base, size_t size) {
  if (!active()) return;
  Blocks span = blocks_of(base, size);
  bring(span.first, span.last, [span](uintptr_t b) { return b != span.first && b != span.last; });
}

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

ROOST_COMMON_TEXT void clear(uintptr_t base, size_t size) {
  if (!active()) return;
  Blocks span = blocks_of(base, size);
  bring(span.first, span.last, [](uintptr_t) { return false; });
}

bool active() {
  if (options::get(options::kHugePages) == 0) return false;
  int mode = g_kernel_mode.load(std::memory_order_relaxed);
  if (mode < 0) {
    mode = os::huge_pages_on_advice() ? 1 : 0;
    g_kernel_mode.store(mode, std::memory_order_relaxed);
  }
  return mode == 1;
}

size_t calls() { return g_calls.load(std::memory_order_relaxed); }

Counts counts() { return Counts{0, 0, 0, 0}; }

}  // namespace roost::huge_pages
