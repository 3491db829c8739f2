// backend/address_space.h — where roost's memory goes in the address space.
//
// Owns: placing the address ranges that hold user memory (the chunk
// allocator's regions and huge objects), the size of a region (the biggest
// the address-space limit and the OS allow, down to what the request
// needs), and keeping the pagemap covering every range handed out.  Where
// roost places memory itself (config::kPlaceInWindow, decided for good by
// pagemap::init()), ranges go in 1 GiB slots from pagemap::window_start()
// upward: regions side by side in one slot at a time, a huge object in a
// run of free slots (free again when it is), and a slot something else
// occupies is skipped.  Otherwise the kernel places them.  Must never: be
// called on a fast path (it takes a lock and makes system calls), or hand
// out a range the pagemap does not cover.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/os.h"

namespace roost::address_space {

// A region for the chunk allocator: 2^*order bytes aligned to its size,
// min_order <= *order <= config::kRegionBits, the biggest the limit allows
// and the OS grants.  nullptr when the OS refuses even 2^min_order.
void* reserve_region(unsigned min_order, unsigned* order);

// Gives back a region reserve_region() returned and nothing uses (its
// metadata could not be had).
void release_region(void* p, unsigned order);

// A huge object's range: `size` bytes (a multiple of the page size) aligned
// to `align` (a power of two, at least the granule).  nullptr when refused.
void* reserve_huge(size_t size, size_t align);

// Gives back the range of a huge object of `size` bytes; false if the OS
// refused (the range stays reserved and placed).
bool release_huge(void* p, size_t size);

// Gives back the tail of a huge object's range beyond `keep` bytes (both
// multiples of the page size); false if the OS refused (nothing changed).
bool shrink_huge(void* p, size_t size, size_t keep);

// Under an address-space limit (RLIMIT_AS, read once, at the first call)
// every reserved byte counts against the program, so roost spends address
// space as it spends memory: objects bigger than the regions the limit
// allows are mapped alone and unmapped when freed (huge_above()), and the
// frontend serves the size classes whose slabs span megabytes as large
// objects.  Without a limit: false, and config::kRegion.
bool scarce();
size_t huge_above();

// One line on stderr, once per process, when roost cannot start: the OS
// refused `bytes` of address space for `what` (its page map, its first
// metadata block, its first region), with the address-space limit if there is one.  Allocations
// fail with ENOMEM meanwhile; roost starts at a later call once there is room.
void report_cannot_start(const char* what, size_t bytes);

// roost's ranges, for reports: in the window, the slots that hold regions
// or huge objects (adjacent ones joined); outside it, the regions reserved
// (the first kTrackedRegions: under sanitizers, where the kernel places
// them; huge objects there are not counted).  At most `max` into `out`,
// in address order; past that the last one grows to take in the rest.
// Returns how many.
size_t ranges(os::AddressRange* out, size_t max);

// What the kernel maps in those ranges now (os::mapped_bytes): the resident
// bytes and those of them backed by transparent huge pages.  False where
// /proc/self/smaps cannot be read.  Slow: for reports only.
bool heap_mapped_bytes(os::MappedBytes* out);

void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace roost::address_space
