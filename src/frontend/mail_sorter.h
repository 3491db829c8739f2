// frontend/mail_sorter.h — sorting a sleeping thread's mail into whole
// slabs, for the service thread.
//
// A thread that sleeps never takes its mail home, and its slabs stay
// resident however much of them other threads freed.  The service may take
// such an inbox's mail (frontend/messenger.h: look_for_neglected_mail) and
// hand it here, batch by batch.  Batches are grouped by slab; a slab of the
// inbox's allocator whose batches hold every object it has (its capacity)
// has nothing left anywhere else, not on its free list, not with the
// program, so it is handed to its owner to start over, its pages as they
// are.  Its pages are purged (purge_whole) only once the list has waited
// unclaimed a purge delay: a thread that was only blocked for a moment
// takes its slabs back resident, and faults nothing back in.  Every other
// batch is returned as it came, for the owner (and the next sort).
//
// Owns: the grouping table (address space reserved once, its pages purged
// after each use), the whole-slab test and the purge of whole slabs.  Must
// never: write a slab's record (the owner may be reading it: only its
// `next` link, once the slab is known whole, for the list handed back),
// allocate, or run on two threads at once (the service's work lock
// serialises it).
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
  bool overflowed = false;  // some slabs did not fit the table
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
// its pages were purged (kPurged), and whether they now read as zero
// (kZeroed: purged with MADV_DONTNEED).  Records are 64-byte aligned: the
// low bits of a link are free.
inline constexpr uintptr_t kZeroed = 1, kPurged = 2, kLinkBits = kZeroed | kPurged;
inline ChunkMeta* link_whole(ChunkMeta* m, ChunkMeta* next, uintptr_t bits) {
  m->next = reinterpret_cast<ChunkMeta*>(reinterpret_cast<uintptr_t>(next) | bits);
  return m;
}
inline uintptr_t whole_bits(const ChunkMeta* m) {
  return reinterpret_cast<uintptr_t>(m->next) & kLinkBits;
}
// Links the list's last slab to `next`, keeping what its link carries.
inline void relink_last(ChunkMeta* last, ChunkMeta* next) {
  link_whole(last, next, whole_bits(last));
}
inline ChunkMeta* next_whole(const ChunkMeta* m) {
  return reinterpret_cast<ChunkMeta*>(reinterpret_cast<uintptr_t>(m->next) & ~kLinkBits);
}
inline bool whole_zeroed(const ChunkMeta* m) { return (whole_bits(m) & kZeroed) != 0; }

// Purges the pages of every slab of the list `whole` (linked by
// link_whole) not purged yet, and marks it so.  The caller keeps the owner
// from taking the list meanwhile (it holds the owner's inbox).  Returns the
// bytes purged (the OS may refuse some).
uint64_t purge_whole(ChunkMeta* whole);

}  // namespace roost::mail_sorter
