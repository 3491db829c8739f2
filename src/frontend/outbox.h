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
  // still take before the sender looks at it again.  The limit
  // (ROOST_OUTBOX_BYTES) is charged in 2^kStretchBits stretches, so that
  // the sender looks a few times before it is full: at a stretch's end it
  // posts early to answer a waiting thread's call for its objects
  // (frontend/backpressure.h).  A long outbox makes long batches, and
  // posting cheap per object; the stretches keep what a waiting thread
  // waits for to a stretch's worth.  Charging `bytes` says
  // whether a stretch ended: the room went below zero (one subtract in
  // place, and a branch on the sign).
  static constexpr unsigned kStretchBits = 2;
  ROOST_INLINE bool charge(uint32_t bytes) {
    room_ -= bytes;
    return room_ < 0;
  }
  // A stretch ended: true when it was the last (the outbox holds its limit:
  // post it); else the next one starts (what the last charge took past the
  // stretch's end is not carried over: at most an object per stretch).
  bool stretch_ended() {
    if (stretches_left_ == 0) return true;
    stretches_left_--;
    room_ = stretch_;
    return false;
  }
  // After posting: room for `limit` bytes again (a limit of 2^63 bytes or
  // more is as good as none).
  void reset_room(uint64_t limit) {
    if (limit > uint64_t{INT64_MAX}) limit = uint64_t{INT64_MAX};
    stretch_ = static_cast<int64_t>(limit >> kStretchBits);
    if (stretch_ == 0) {
      room_ = static_cast<int64_t>(limit);
      stretches_left_ = 0;
    } else {
      room_ = stretch_;
      stretches_left_ = (1u << kStretchBits) - 1;
    }
  }

 private:
  Bucket buckets_[kBuckets] = {};
  BitSet<kBuckets> filled_;  // the buckets that hold messages
  int64_t room_ = 0;         // bytes to the end of the stretch; below zero: it ended
  int64_t stretch_ = 0;
  unsigned stretches_left_ = 0;
};

}  // namespace roost
