// frontend/outbox.h — remote frees collected for posting, by destination.
//
// Owns: 2^kBucketBits lists of freed objects keyed by bits of their owner's
// allocator id, and the room left that decides when to post them.  Posting
// (Messenger::post) sends each bucket to the owner of its first
// object with one atomic exchange; the bucket of the sender's own id bits
// (its home bucket) is re-sorted by the next bits instead, so that no
// per-destination state exists and any number of allocators works.  Must
// never: post anything itself, or allocate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.h"
#include "ds/bitset.h"
#include "ds/mpsc_queue.h"

namespace roost {

class Outbox {
 public:
  static constexpr unsigned kBuckets = 1u << config::kBucketBits;
  static constexpr unsigned kMask = kBuckets - 1;

  struct Bucket {
    QueueNode* head;
    QueueNode* tail;
  };

  // Files `node` under bucket `b`.
  ROOST_INLINE void add(unsigned b, QueueNode* node) {
    Bucket& bucket = buckets_[b];
    // Relaxed: the thread's own until posted (the enqueue's release).
    node->set_next(bucket.head, std::memory_order_relaxed);
    bucket.head = node;
    if (bucket.tail == nullptr) {
      bucket.tail = node;
      filled_.insert(b);
    }
  }

  // Takes bucket `b`'s list; nullptr when empty.
  Bucket take(unsigned b) {
    Bucket out = buckets_[b];
    buckets_[b] = Bucket{nullptr, nullptr};
    filled_.erase(b);
    return out;
  }

  bool empty(unsigned b) const { return buckets_[b].head == nullptr; }

  // Calls fn(b) for every bucket b that holds messages, in increasing order
  // (posting visits only these, not every bucket).  fn may take bucket b but
  // must not file messages: a bucket filled during the walk may be missed.
  template <typename Fn>
  void for_each_filled(Fn&& fn) {
    filled_.for_each(fn);
  }

  // The room: bytes the outbox (and the remote cache in front of it) may
  // still take before it is posted.  Charging `bytes` says whether the
  // outbox is full: the room would go below zero (one subtract, and a
  // branch on its borrow).
  ROOST_INLINE bool charge(uint32_t bytes) { return __builtin_sub_overflow(room_, bytes, &room_); }
  // After posting: room for `limit` bytes (ROOST_OUTBOX_BYTES) again.
  void reset_room(uint64_t limit) { room_ = limit; }

 private:
  Bucket buckets_[kBuckets] = {};
  BitSet<kBuckets> filled_;  // the buckets that hold messages
  uint64_t room_ = 0;
};

}  // namespace roost
