// backend/residency.h — what stays resident, and why: the residency policy
// of released chunks (docs/DESIGN.md, "What stays resident").
//
// Owns: the decay of released ("dirty") chunks: their two generations, the
// purge delay and its stretching, the demand kept for big chunks, the dirty
// cap that follows the program, and the purges they decide
// (backend/residency.cc).  The calls here are backend/chunk_allocator.cc's
// and backend/page_moves.cc's; the rest of roost reaches the policy through
// backend/chunk_allocator.h (purge_all, purge_due, purge_delay_now_ns, the
// counters).  Must never: purge under the backend's lock, take memory from
// the buddy lists, or hold a policy number of its own (src/config.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/chunk_meta.h"
#include "ds/dlist.h"

namespace roost::chunks {

// ---- released chunks, in and out (the backend's lock held) ----

// A dirty chunk into the young generation, merged with dirty buddies (the
// merged extent covers both parts).
void merge_dirty(ChunkMeta* m);
// A dirty chunk of `order` to `max_order`, taken off its generation and
// split down to `order` (the pieces split off go back, dirty or free);
// nullptr if none.  `fill`: the bytes the caller will use (0: not told).
ChunkMeta* take_dirty(unsigned order, unsigned max_order, size_t fill);

// The generations' lists of `order`, for page moves' donors.
enum class Generation { kYoung, kOld };
DList<ChunkMeta>& dirty_list(Generation gen, unsigned order);
// `m`, just taken off its dirty list, put in front of `all` (chunks in
// transit, linked through `next`, found by no merge); returns the new list.
ChunkMeta* into_transit(ChunkMeta* m, ChunkMeta* all);

// ---- the program's demand, as the policy sees it (lock held) ----

// A chunk of 2^order bytes handed out; `clean`: one that must be faulted in.
void note_handout(unsigned order, bool clean);
// `bytes` of a clean chunk handed out that page moves filled after all.
void note_moved_in(size_t bytes);

// ---- the clock ----

// Ages the generations if a purge delay has passed, and purges down to the
// mark if dirty memory is over its cap.  Both locks held; returns the bytes
// purged.
size_t decay_locked(uint64_t now);
// decay_locked() with only the backend's lock held: skipped while another
// thread purges (the aging is its job then).
size_t decay(uint64_t now);

}  // namespace roost::chunks
