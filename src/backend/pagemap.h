// backend/pagemap.h — address -> chunk metadata, one flat array.
//
// Owns: the pagemap, a flat array with one entry per 64 KiB granule from
// address 0 up to a limit, lazily committed (only touched parts cost
// memory).  An entry is the ChunkMeta of the chunk covering the granule, or
// null for memory roost does not own; an address at or above the limit is
// not roost's.  The limit covers whatever roost has placed: where roost
// places its memory itself (backend/address_space.h, config::kPlaceInWindow)
// the array sits at a random place from config::kPagemapBase and grows in
// place as the window does, so it costs address space in proportion to roost's memory;
// otherwise it covers the whole user address space (config::kAddressBits:
// 47 bits on x86-64, 48 on AArch64) from the start.
// Slabs map every granule; large objects map their first.  An entry holds
// its record's address XOR the stray record's (g_stray), so an entry never
// written, or cleared, reads as the stray record (ownerless, kind kUnused)
// and the free fast path needs no null test: its owner comparison sends it
// to the slow path.  Must never: allocate, or interpret the metadata.
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
// reaches each PC-relative (one instruction on x86-64; adrp and a load on
// AArch64).  Entries change while
// other threads look them up: atomic, relaxed (a thread that finds an entry
// reads the record's fields its owner published before handing the memory
// out).  g_entries is set once, in init(); g_limit only grows, with a
// release store, before any memory it newly covers is handed out (so a
// thread holding such a pointer got it through synchronisation that also
// shows it the new limit).  The fast path reads both plainly, so the
// limit's load folds into its compare: an aligned word load, which x86-64
// and AArch64 never tear.
extern std::atomic<uintptr_t>* g_entries ROOST_HIDDEN;
extern uintptr_t g_limit ROOST_HIDDEN;

// What an unused entry reads as, and the key entries are XORed with (its
// address, in a variable so that the fast path's XOR reads it from memory
// in the same instruction).
extern ChunkMeta g_stray ROOST_HIDDEN;
extern ChunkMeta* g_stray_key ROOST_HIDDEN;

// An entry for `meta` (0 for null), and back; zero decodes as the stray
// record.
ROOST_INLINE uintptr_t encode(const ChunkMeta* meta) {
  return meta == nullptr
             ? 0
             : reinterpret_cast<uintptr_t>(meta) ^ reinterpret_cast<uintptr_t>(g_stray_key);
}
ROOST_INLINE ChunkMeta* decode(uintptr_t entry) {
  return reinterpret_cast<ChunkMeta*>(entry ^ reinterpret_cast<uintptr_t>(g_stray_key));
}
ROOST_INLINE bool is_stray(const ChunkMeta* m) { return m == &g_stray; }

// Reserves the table.  Returns false if the OS refused (wanted_bytes() says
// how much it asked for).
bool init();
size_t wanted_bytes();

// Grows the table to cover [0, end) if it does not yet; false if the OS
// refused.  The caller serialises calls (backend/address_space.cc's lock).
bool cover(uintptr_t end);

// Does the table grow with the window (true), or cover every address?
bool grows();
// Where the window begins (its first slot, drawn at random in init()).
uintptr_t window_start();

// Address space the table holds now.
size_t reserved_bytes();

// The record of the chunk covering `p`, or nullptr when roost does not own it.
ROOST_INLINE ChunkMeta* lookup(const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uintptr_t index = a >> config::kGranuleBits;
  if (ROOST_UNLIKELY(index >= g_limit)) return nullptr;
  uintptr_t entry = g_entries[index].load(std::memory_order_relaxed);
  return entry == 0 ? nullptr : decode(entry);
}

// The free fast path's lookup, in two steps.  aligned_index() folds in the
// check that `p` is 16-byte aligned: rotating the low four bits to the top
// before the shift makes any misaligned pointer's index fail in_table(),
// so it is "not ours" (and the slow path diagnoses it) at no extra
// instruction.  record_at() of an index in the table is never null: the
// stray record where roost owns nothing.
ROOST_INLINE uintptr_t aligned_index(const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uintptr_t rotated = (a >> config::kMinAllocBits) | (a << (64 - config::kMinAllocBits));
  return rotated >> (config::kGranuleBits - config::kMinAllocBits);
}
ROOST_INLINE bool in_table(uintptr_t index) { return index < g_limit; }
ROOST_INLINE ChunkMeta* record_at(uintptr_t index) {
  return decode(g_entries[index].load(std::memory_order_relaxed));
}

// Maps the granules of [base, base + bytes) to `meta` (or null to unmap).
void set_range(uintptr_t base, size_t bytes, ChunkMeta* meta);

}  // namespace roost::pagemap
