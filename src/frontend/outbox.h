// frontend/outbox.h — remote frees collected for posting, by destination.
//
// Owns: 2^kBucketBits lists of freed objects keyed by bits of their owner's
// allocator id, and the room left that decides when to post them.  Posting
// (Allocator::flush_outbox) sends each bucket to the owner of its first
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
    node->next.store(bucket.head, std::memory_order_relaxed);
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

  // Bytes the outbox (and the remote cache in front of it) may still take
  // before it is posted: ROOST_OUTBOX_BYTES less the object bytes held.
  uint64_t room = 0;

 private:
  Bucket buckets_[kBuckets] = {};
  BitSet<kBuckets> filled_;  // the buckets that hold messages
};

}  // namespace roost
