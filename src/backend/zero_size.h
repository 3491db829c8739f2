// backend/zero_size.h — the secure build's zero-size allocations: addresses
// that fault on every read and write.
//
// Owns: one range of address space, reserved the first time it is needed,
// made inaccessible and mapped in the pagemap to a record of kind
// kZeroSize, and a bitmap of which of its 16-byte steps are allocated.
// Each allocation is the next free step (aligned further when asked), so no
// two live ones share an address; the steps go round the range.  A free
// clears the step's bit, so a second free of it is seen.  Must never: hand
// out an address that can be read or written, or be used by the default
// build (config::kZeroSizeFaults).
#pragma once

#include <cstddef>

namespace roost::zero_size {

// An address for a zero-size allocation aligned to `align` (a power of two,
// at most config::kZeroSizeMaxAlign); nullptr when the range cannot be had
// or no free step turns up soon (the caller then allocates an object as for
// one byte).  Needs the pagemap.
void* alloc(size_t align);

// Frees `p`, a step of the range; false when it was not allocated (freed
// already, or never handed out).
bool free(const void* p);

// Around fork(): taken before the metadata arena's and the address space's
// locks (the range's set-up takes them).
void lock_for_fork();
void unlock_after_fork(bool child);

}  // namespace roost::zero_size
