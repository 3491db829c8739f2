// backend/pagemap.h — address -> chunk metadata, one flat array.
//
// Owns: the pagemap, a flat array with one entry per 64 KiB granule of the
// 47-bit address space, reserved with lazy commit (only touched parts cost
// memory).  An entry is the ChunkMeta of the chunk covering the granule, or
// null for memory roost does not own.  Slabs map every granule; large
// objects map their first.  Must never: allocate, or interpret the metadata.
#pragma once

#include <atomic>
#include <cstdint>

#include "backend/chunk_meta.h"
#include "config.h"
#include "ds/bits.h"

namespace roost::pagemap {

inline constexpr size_t kEntries = size_t{1} << (config::kAddressBits - config::kGranuleBits);

// The table and its number of entries: zero entries until init() succeeded,
// so a lookup before then (a stray free of a foreign pointer) says "not
// ours" instead of faulting.  Two variables, not a struct, so the fast path
// reaches each with one RIP-relative instruction.  Entries change while
// other threads look them up: atomic, relaxed (a thread that finds an entry
// reads the record's fields its owner published before handing the memory
// out).  The two variables are set once, in init(), before the limit is
// published with a release store; the fast path reads them plainly, so the
// limit's load folds into its compare.
extern std::atomic<ChunkMeta*>* g_entries ROOST_HIDDEN;
extern uintptr_t g_limit ROOST_HIDDEN;

// Reserves the table.  Returns false if the OS refused.
bool init();

ROOST_INLINE ChunkMeta* lookup(const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uintptr_t index = a >> config::kGranuleBits;
  if (ROOST_UNLIKELY(index >= g_limit)) return nullptr;
  return g_entries[index].load(std::memory_order_relaxed);
}

// lookup() for the free fast path, folding in the check that `p` is 16-byte
// aligned: rotating the low four bits to the top before the shift makes any
// misaligned pointer's index exceed the table, so it says "not ours" (and
// the slow path diagnoses it) at no extra instruction.
ROOST_INLINE ChunkMeta* lookup_aligned(const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uintptr_t rotated = (a >> config::kMinAllocBits) | (a << (64 - config::kMinAllocBits));
  uintptr_t index = rotated >> (config::kGranuleBits - config::kMinAllocBits);
  if (ROOST_UNLIKELY(index >= g_limit)) return nullptr;
  return g_entries[index].load(std::memory_order_relaxed);
}

// Maps the granules of [base, base + bytes) to `meta` (or null to unmap).
void set_range(uintptr_t base, size_t bytes, ChunkMeta* meta);

}  // namespace roost::pagemap
