// backend/huge_pages.h — transparent huge pages: the ROOST_HUGEPAGES policy.
//
// Owns: which 2 MiB blocks of the regions are huge pages by roost's doing
// and the rules for them, by policy (options::HugePolicy):
//  - `dense` (the default): a block every granule of which is handed out
//    (slabs, a large object) and whose pages are all resident (but
//    config::kDenseMissingPages), on two looks in a row a while apart, is
//    collapsed into a huge page (MADV_COLLAPSE) by the service thread's
//    look(), a few blocks a look, once the heap holds config::kDenseHeapFloor;
//    a block the backend is about to purge in part loses its state first
//    (the kernel splits the huge page), and one collapsed and split again
//    waits longer before the next collapse.  A collapse maps the block's
//    missing pages: the block is filled until it is purged whole, and a
//    chunk in it goes back to the backend dirty to the block's end, so its
//    next purge gives those pages back too.  Nothing is advised, so page
//    faults never assemble a huge page on a program's thread and khugepaged
//    leaves the blocks alone.
//  - `always`: every region is advised (MADV_HUGEPAGE) as it is reserved,
//    and a huge object's blocks between its first and its last as it is
//    mapped (mimalloc's trade: faults assemble huge pages on the program's
//    threads, and sparse memory gets them too; a partial purge splits one,
//    which khugepaged may assemble again).
//  - `off`: nothing.
// The kernel must be in THP mode `madvise` with 2 MiB huge pages; a kernel
// that does not know MADV_COLLAPSE or refuses it to the process costs one
// try, and `dense` then behaves as `off`.
// Must never: collapse a block on a program's thread (only look() does, on
// the service's), advise a block under `dense`, make a system call for a
// heap below the floor, or be called on a fast path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/os.h"

namespace roost::huge_pages {

// ---- `always`: the advice ----

// An object mapped on its own (a huge object), just mapped, or just
// `shrunk` in place (its tail unmapped): its blocks between its first and
// its last get the advice, and the block a shrink makes its last loses it.
void fit_mapped(uintptr_t base, size_t size, bool shrunk);

// A region [base, base + size) just reserved: advised whole.
void fit_region(uintptr_t base, size_t size);

// Whether the advice is given: ROOST_HUGEPAGES is `always` and the
// kernel's THP mode is `madvise`.  (Pages moved from one range to another
// take the advice of the range they come from along: backend/large.cc
// moves none while this holds.  Under `dense` nothing is advised, and a
// collapsed block moved whole stays a huge page where it lands: moves stay
// on, and moved() carries the block's state.)
bool active();

// madvise calls made for the advice so far (the tests read it).
size_t calls();

// ---- `dense`: collapses by the service thread ----

// Whether dense blocks are collapsed: ROOST_HUGEPAGES is `dense`, the
// kernel's THP mode is `madvise`, and it has not refused MADV_COLLAPSE as
// unknown or forbidden.
bool dense();

// The service thread's look at the regions at `now` (os::now_ns): streaks
// of dense looks counted, blocks that qualify collapsed (a bounded number).
// Returns when the next look is due, UINT64_MAX when none is (`dense` off,
// a heap below the floor, or nothing found for a while: wants_look() ends
// that).
uint64_t look(uint64_t now);

// On the backend's slow path, after it handed out a chunk: whether the
// looks had stopped and should start again (the heap grew past the floor):
// true once, the caller then wakes the service.  Loads only, but for that
// once.
bool wants_look();
// Whether a look is due that no wake will announce (the service's check
// before it sleeps without a time limit).
bool look_pending();

// [base, base + size) (in a region) is about to be purged: every block it
// overlaps that is collapsed loses that state (counted as split again,
// with a longer wait before the next collapse, where the purge covers part
// of it), and under `always` a block it covers in part loses its advice
// Returns false, changing nothing, where the range overlaps the block the
// service is collapsing now: the caller (the backend's purge, whose chunks
// are off its lists and marked so before a full fence) must not purge it
// now.  Free where no block is collapsed or being collapsed.
bool before_purge(uintptr_t base, size_t size);

// Waits (yielding) while the service collapses a block that
// [base, base + size) overlaps: malloc_trim's purge, which must leave
// nothing dirty, after before_purge() said no.
void await_collapse(uintptr_t base, size_t size);

// A chunk [base, base + size) going back to the backend with its first
// `dirty` bytes written: the extent its purge must cover.  A collapse maps
// a block's missing pages (zeros), so where the chunk's clean part lies in
// a block collapsed since it was last purged whole, the extent reaches to
// the end of the last such block.  `dirty` where no block was collapsed.
size_t filled_extent(uintptr_t base, size_t size, size_t dirty);

// [base, base + size), whole blocks, is free and clean (purged or never
// touched): its blocks are no longer filled.
void cleaned(uintptr_t base, size_t size);

// The pages of [from, from + bytes) moved to [to, to + bytes) (whole
// blocks' worth, 2 MiB-aligned: backend/chunk_allocator.cc's moves): a
// collapsed or filled block's state goes with its pages.
void moved(uintptr_t from, uintptr_t to, size_t bytes);

// Collapses of dense 2 MiB blocks into huge pages (MADV_COLLAPSE, made off
// the program's threads) since start: asked of the kernel, granted, and
// refused (the kernel had no huge page to give, or does not know the
// call); and the blocks roost holds as collapsed now.
struct Counts {
  uint64_t collapses_tried, collapses_done, collapses_refused, blocks_collapsed;
};
Counts counts();

// Whether roost holds the block at `addr` as collapsed, and as filled
// (tests).
bool collapsed(uintptr_t addr);
bool filled(uintptr_t addr);

// ---- tests ----
namespace testing {
// Stands in for the kernel's MADV_COLLAPSE (nullptr: the kernel's).
void set_collapse(os::Collapse (*fn)(void* p, size_t size));
// The heap floor in force (config::kDenseHeapFloor until set).
void set_heap_floor(size_t bytes);
// Looks start again from scratch: the kernel asked again, no streaks and
// no splits (collapsed blocks stay), the next look due in an hour (a test
// drives look() with times of its own, two hours apart).
void reset();
// System calls the looks made since start (mincore, MADV_COLLAPSE).
size_t look_syscalls();
}  // namespace testing

}  // namespace roost::huge_pages
