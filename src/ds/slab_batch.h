// ds/slab_batch.h — freed objects of one slab travelling home as one message.
//
// A batch is a list of objects of one slab linked through their link words
// (ds/freelist.h), head -> ... -> tail.  The tail is the message: its link
// word is the inbox queue's link (its successor in the batch would be
// none), and its batch word records where the head is (a byte offset from
// the tail: both lie in one slab) and how many objects the batch holds.
// So the owner splices the whole batch into the slab's free list and
// adjusts the slab's count in constant time, whatever its size (BatchIt,
// ISMM'24 §3.2).  A single object is a batch of one whose head is its tail.
//
// The batch word is the tail's word beside its link, unless that word
// holds the free mark (ds/free_mark.h): then it is the tail's last word.
// A 16-byte object has no word to spare: in the secure build it always
// travels alone (its callers never batch it) and keeps its mark; in the
// default build a batch of them carries its word in place of the tail's
// mark, which the receiver writes back.  The batch word is always odd, so
// it never reads as a mark (an aligned address): a 16-byte tail freed
// again on its way shows.
//
// Owns: the layout of a message and the batch word's encoding.  Must never:
// know which slab or allocator a batch belongs to, or read the objects
// between head and tail.
#pragma once

#include <cstdint>

#include "config.h"
#include "ds/bits.h"
#include "ds/free_mark.h"
#include "ds/freed_zero.h"
#include "ds/freelist.h"
#include "ds/mpsc_queue.h"

namespace roost {

static_assert(sizeof(QueueNode) == sizeof(uintptr_t), "a queue link fits a link word");

namespace slab_batch {

// The batch word: the head's offset from the tail, signed, in its bits
// from kOffsetShift up (every slab is far smaller than 2 GiB), and the
// count below them.  Where the byte before an object is checked
// (config::kCheckByteBefore: the hardened build) the word, a tail's last,
// must have a top byte of 0 (ds/slack_canary.h): there the offset takes
// bits 24 to 55, as a 32-bit number, and the count the bits below (a slab
// holds at most 2^16 - 1 objects: ds/sizeclass.h).
inline constexpr unsigned kOffsetShift = config::kCheckByteBefore ? 24 : 32;
static_assert(kOffsetShift == 32 || config::kCheckMessages,
              "open() leaves its report to checks::batch");
inline constexpr uint64_t kCountMask = (uint64_t{1} << kOffsetShift) - 1;

struct Batch {
  FreeObject* head;
  FreeObject* tail;
  uint32_t count;
};

// Can objects of `obj_size` bytes travel in batches of more than one?
ROOST_INLINE bool batches_allowed(uint32_t obj_size) {
  return !config::kDetectDoubleFree || obj_size > 2 * sizeof(uint64_t);
}

// The queue node of a message whose tail is `tail` (its link word), and
// back.
ROOST_INLINE QueueNode* node_of(FreeObject* tail) {
  return reinterpret_cast<QueueNode*>(&tail->word[config::kLinkWord]);
}
ROOST_INLINE FreeObject* tail_of(QueueNode* node) {
  return reinterpret_cast<FreeObject*>(reinterpret_cast<uintptr_t*>(node) - config::kLinkWord);
}
ROOST_INLINE const void* tail_of(const void* node) {
  return static_cast<const uintptr_t*>(node) - config::kLinkWord;
}

// Does a tail of `obj_size` bytes keep its batch word beside its link (where
// a 16-byte one of the default build loses its mark)?
ROOST_INLINE bool batch_word_beside_link(uint32_t obj_size) {
  return !config::kMarkFreed || obj_size <= 2 * sizeof(uint64_t);
}

// Where a tail of `obj_size` bytes keeps its batch word.
ROOST_INLINE uint64_t* batch_word(FreeObject* tail, uint32_t obj_size) {
  if (batch_word_beside_link(obj_size)) return free_mark::word(tail);
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(tail) + obj_size) - 1;
}

// Writes the batch word into the tail (objects of `obj_size` bytes);
// returns the message to enqueue.
ROOST_INLINE QueueNode* seal(FreeObject* head, FreeObject* tail, uint32_t count,
                             uint32_t obj_size) {
  // (A tail that travels alone keeps its mark: it has no batch word.)
  if (batches_allowed(obj_size)) {
    int64_t offset = reinterpret_cast<intptr_t>(head) - reinterpret_cast<intptr_t>(tail);
    // (Shifted up to the top, then down to its place: its sign's copies
    // above bit 55 shifted out.)
    uint64_t at = static_cast<uint64_t>(offset) << 32 >> (32 - kOffsetShift);
    *batch_word(tail, obj_size) = at | uint64_t{count} << 1 | 1;
  }
  return node_of(tail);
}

// Reads a received message (objects of `obj_size` bytes) back into its
// batch.
ROOST_INLINE Batch open(QueueNode* node, uint32_t obj_size) {
  FreeObject* tail = tail_of(node);
  if (!batches_allowed(obj_size)) return Batch{tail, tail, 1};
  uint64_t word = *batch_word(tail, obj_size);
  int64_t offset = static_cast<int64_t>(word << (32 - kOffsetShift)) >> 32;
  auto* head = reinterpret_cast<FreeObject*>(reinterpret_cast<intptr_t>(tail) + offset);
  auto count = static_cast<uint32_t>((word & kCountMask) >> 1);
  // Where the word's top byte is kept 0, anything there was written into
  // the message on its way: a count of 0, which the receiver's check
  // reports (checks::batch: a corrupted message).
  if constexpr (kOffsetShift != 32) {
    if ((word >> (kOffsetShift + 32)) != 0) count = 0;
  }
  return Batch{head, tail, count};
}

// Links the batch's tail (objects of `obj_size` bytes) to `rest` and
// returns its head: the batch spliced in front of the list `rest`.  The
// hardened build's tail reads zero again where its batch word was.
ROOST_INLINE FreeObject* splice(const Batch& b, FreeObject* rest, uint32_t obj_size) {
  if constexpr (config::kDetectDoubleFree && config::kZeroOnFree)
    freed_zero::clear_last_word(b.tail, obj_size);
  freelist::set_next(b.tail, rest);
  return b.head;
}

}  // namespace slab_batch
}  // namespace roost
