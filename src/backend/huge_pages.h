// backend/huge_pages.h — transparent huge pages for the inside of large
// objects.
//
// Owns: which 2 MiB blocks of the regions carry the kernel's huge-page
// advice (MADV_HUGEPAGE), and the rule for them: a large object's blocks
// between its first and its last have it, its first and last blocks and
// every block that holds slabs have not.  A program that uses a big buffer
// whole then takes one page fault and one TLB entry per 2 MiB inside it,
// while one that writes only a big object's head and tail (a header, a
// last element) does not get a 2 MiB page for a 4 KiB write.  Active only
// where ROOST_HUGEPAGES is on (it is off by default: a program that writes a
// word here and there inside its big objects would have the 2 MiB around
// each word made resident) and the kernel's THP mode is `madvise`.
// Must never: advise a block that holds memory other than a large object's
// inside, or be called on a fast path (it makes system calls).
#pragma once

#include <cstddef>
#include <cstdint>

namespace roost::huge_pages {

// Gives the blocks of the large object [base, base + size) in a region
// (size page-rounded, the object alone in its chunk) the advice the rule
// asks for; blocks that have it already cost nothing.
void fit_large(uintptr_t base, size_t size);

// The same for an object mapped on its own (a huge object), just mapped,
// or just `shrunk` in place (its tail unmapped): its blocks are nobody
// else's and go with it.
void fit_mapped(uintptr_t base, size_t size, bool shrunk);

// Takes the advice off every block that overlaps [base, base + size) in a
// region: that memory is about to hold slabs.
void clear(uintptr_t base, size_t size);

// Whether the advice is given: ROOST_HUGEPAGES is on and the kernel's THP
// mode is `madvise`.  (Pages moved from one range to another take the
// advice of the range they come from along: backend/large.cc moves none
// while this holds.)
bool active();

// madvise calls made so far (the tests read it).
size_t calls();

// Collapses of dense 2 MiB blocks into huge pages (MADV_COLLAPSE, made off
// the program's threads) since start: asked of the kernel, granted, and
// refused (the kernel had no huge page to give, or does not know the
// call); and the blocks roost holds as collapsed now.
struct Counts {
  uint64_t collapses_tried, collapses_done, collapses_refused, blocks_collapsed;
};
Counts counts();

}  // namespace roost::huge_pages
