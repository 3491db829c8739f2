// frontend/mail_sorter.h — sorting a sleeping thread's mail into whole
// slabs, for the service thread.
//
// A thread that sleeps never takes its mail home, and its slabs stay
// resident however much of them other threads freed.  The service may take
// such an inbox's mail (frontend/messenger.h: look_for_neglected_mail) and
// hand it here, batch by batch.  Batches are grouped by slab; a slab of the
// inbox's allocator whose batches hold every object it has (its capacity)
// has nothing left anywhere else, not on its free list, not on a fast
// list, not with the program, so its pages are purged at once and it is
// handed to its owner to start over.  Every other batch is returned as it
// came, for the owner (and the next sort).
//
// Owns: the grouping table (address space reserved once, its pages purged
// after each use) and the whole-slab test.  Must never: write a slab's
// record (the owner may be reading it: only its `next` link, once the slab
// is known whole, for the list handed back), allocate, or run on two
// threads at once (the service's work lock serialises it).
#pragma once

#include <cstdint>

#include "backend/chunk_meta.h"
#include "ds/mpsc_queue.h"

namespace roost::mail_sorter {

// What a sort came to.
struct Result {
  // Not whole, linked through their queue links (nullptr-terminated).
  QueueNode* rest_first = nullptr;
  QueueNode* rest_last = nullptr;
  // Whole slabs, linked through `next` (see link_whole / next_whole).
  ChunkMeta* whole = nullptr;
  ChunkMeta* whole_last = nullptr;
  uint64_t whole_slabs = 0;
  uint64_t whole_batches = 0;
  uint64_t whole_objects = 0;
  uint64_t bytes_purged = 0;  // of the whole slabs (the OS may refuse some)
  bool overflowed = false;    // some slabs did not fit the table
};

// One sort: add() every batch taken from the inbox of the allocator whose
// slabs name `owner`, then finish().
class Sorter {
 public:
  explicit Sorter(const void* owner);
  Sorter(const Sorter&) = delete;
  Sorter& operator=(const Sorter&) = delete;

  void add(QueueNode* node);
  Result finish();

 private:
  // Appends the chain first..last (linked) to the batches returned.
  void to_rest(QueueNode* first, QueueNode* last);

  const void* owner_;
  Result result_;
  uint32_t used_ = 0;  // table slots in use
};

// A whole slab on the list handed to the owner: the link carries whether
// its pages now read as zero (purged with MADV_DONTNEED).
inline ChunkMeta* link_whole(ChunkMeta* m, ChunkMeta* next, bool zeroed) {
  m->next = reinterpret_cast<ChunkMeta*>(reinterpret_cast<uintptr_t>(next) | (zeroed ? 1 : 0));
  return m;
}
// Links the list's last slab to `next`, keeping what its link carries.
inline void relink_last(ChunkMeta* last, ChunkMeta* next) {
  uintptr_t zeroed = reinterpret_cast<uintptr_t>(last->next) & 1;
  last->next = reinterpret_cast<ChunkMeta*>(reinterpret_cast<uintptr_t>(next) | zeroed);
}
inline ChunkMeta* next_whole(const ChunkMeta* m) {
  return reinterpret_cast<ChunkMeta*>(reinterpret_cast<uintptr_t>(m->next) & ~uintptr_t{1});
}
inline bool whole_zeroed(const ChunkMeta* m) {
  return (reinterpret_cast<uintptr_t>(m->next) & 1) != 0;
}

}  // namespace roost::mail_sorter
