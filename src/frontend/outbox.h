// frontend/outbox.h — remote frees collected for posting, by destination.
//
// Owns: 2^kBucketBits lists of freed objects keyed by bits of their owner's
// allocator id, and the byte count that decides when to post them.  Posting
// (Allocator::flush_outbox) sends each bucket to the owner of its first
// object with one atomic exchange; the bucket of the sender's own id bits
// (its home bucket) is re-sorted by the next bits instead, so that no
// per-destination state exists and any number of allocators works.  Must
// never: post anything itself, or allocate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.h"
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
    if (bucket.tail == nullptr) bucket.tail = node;
  }

  // Takes bucket `b`'s list; nullptr when empty.
  Bucket take(unsigned b) {
    Bucket out = buckets_[b];
    buckets_[b] = Bucket{nullptr, nullptr};
    return out;
  }

  bool empty(unsigned b) const { return buckets_[b].head == nullptr; }

  size_t bytes = 0;  // object bytes held, against the flush threshold

 private:
  Bucket buckets_[kBuckets] = {};
};

}  // namespace roost
