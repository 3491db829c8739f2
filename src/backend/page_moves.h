// backend/page_moves.h — released pages moved, not faulted in
// (ROOST_MOVE_PAGES, config::kMoveBits): the resident pages of released
// chunks moved by the kernel's page tables into a big chunk handed out.
//
// Owns: choosing the donors (plan), whether a donor is worth moving, and
// carrying the moves out (backend/page_moves.cc); chunks::move() and
// chunks::moved_bytes() (declared in backend/chunk_allocator.h).  Must
// never: move pages under the backend's lock, move a chunk's guard page, or
// decide how long released memory stays (backend/residency.h does).
#pragma once

#include <cstddef>

#include "backend/chunk_meta.h"

namespace roost::chunks {

// alloc(order, fill) where moves may fill the chunk: under the purge lock
// (tried: while another thread purges, the chunk is taken without moves).
ChunkMeta* take_filled(unsigned order, size_t fill);

}  // namespace roost::chunks
