// frontend/remote_cache.h — BatchIt: remote frees collected by slab.
//
// A small set-associative cache in front of the outbox, keyed by slab: a
// free of another allocator's object joins the batch of its slab if that
// slab is cached (a local append), else takes a way of its set, evicting
// one batch if the set is full.  An evicted batch goes to the outbox as one
// message, which its owner splices into the slab in constant time
// (ds/slab_batch.h).  A slab's set is its size class, offset by a
// multiply-shift hash of its owner: one owner's slabs of different classes
// (a consumer freeing objects of many sizes from one producer) take
// different sets and never evict each other, and different owners' slabs
// of one class (many producers of one size) spread over the sets.
// Eviction policy (config::kBatchItEviction): the way holding the most
// objects (the BatchIt paper's), or the least recently used.
//
// Each size class has a lane: the way its latest add used.  A free whose
// slab is its class's lane's finds the batch with no hashing, also when
// frees of other classes come between (objects of many sizes handed from
// one thread to another and freed in the order they were made).  A batch
// keeps its objects in the order they were freed (appended at its tail),
// so the owner's free list, and the next objects it hands out, keep it too.
//
// Flushing takes the batches out and leaves each way with its slab, empty,
// so the lanes still lead there: the next free of that slab is an append
// again.  A way keeps its slab until another slab of its set needs it (an
// empty way is taken before a batch is evicted).  The ways whose batch is
// not empty are listed as they start one (the append that starts a batch
// says so: one branch on the fast path), so a flush costs a few
// instructions per batch and nothing per way that holds none.
//
// Owns: the cached batches, the list of those not empty, and the lanes.
// Must never: post anything itself (the caller files what comes out in its
// outbox), or allocate.
#pragma once

#include "backend/chunk_meta.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/counter.h"
#include "ds/sizeclass.h"
#include "ds/slab_batch.h"
#include "frontend/ownership.h"

namespace roost {

class RemoteCache {
 public:
  static constexpr unsigned kSets = 1u << config::kBatchItSetBits;
  static constexpr unsigned kWays = config::kBatchItWays;

  static constexpr bool kLru = config::kBatchItEviction == config::Eviction::kLeastRecentlyUsed;

  constexpr RemoteCache() {
    for (Entry*& lane : lanes_) lane = &none_;
  }
  RemoteCache(const RemoteCache&) = delete;  // lanes_ point into the cache itself
  RemoteCache& operator=(const RemoteCache&) = delete;

  // A way: a slab's batch, head -> ... -> tail in the order they were
  // freed.  Its `first` stands before the head: its link is the head, and
  // an empty batch's tail is `first` itself, so an append needs no test.
  // The fields the free fast path reads come first.
  struct Entry {
    ChunkMeta* slab;  // nullptr: the way is free
    FreeObject* tail;
    // The tail's index in the batch: its objects less one, kNone when it
    // holds none (so the append that starts a batch wraps it to 0, and one
    // add-and-branch both counts and tells).
    uint32_t tail_index;
    uint32_t last_use;  // LRU only: the set's clock at the last add
    FreeObject first;

    uint32_t objects() const { return tail_index + 1; }  // kNone wraps to 0
  };
  static constexpr uint32_t kNone = ~uint32_t{0};
  // A batch taken out of the cache.
  struct Batch {
    ChunkMeta* slab;
    FreeObject* head;
    FreeObject* tail;
    uint32_t count;
  };

  // Class `sc`'s lane: always a way of this cache (or an empty one that
  // never holds a slab), so a caller compares its slab with no null test.
  // Every chunk record's class is at most sizeclass::kCount: 0 until a slab
  // starts in it, its class while it is a slab, kCount once retired
  // (slab::retire), whose lane holds nothing: a record that is no longer a
  // slab never matches the way it had.
  ROOST_INLINE Entry* lane(unsigned sc) const { return lanes_[sc]; }

  // Appends `o` to the batch of `e` (a way of this cache, whose slab holds
  // `o`), and lists the way when this starts its batch.  That way is then
  // the most recently used of its set: LRU order needs no update.
  ROOST_INLINE void append(Entry* e, FreeObject* o) {
    freelist::set_next(e->tail, o);
    e->tail = o;
    if (ROOST_UNLIKELY(++e->tail_index == 0)) started_[started_count_++] = e;
  }

  // The shortcut for a run of frees of one class into one slab: if the
  // class's lane holds slab `m`, appends `p` there and returns true, with
  // no hashing.  An empty cache never matches (its ways hold no slab), so
  // with BatchIt off this is one failed compare.
  ROOST_INLINE bool add_to_lane(ChunkMeta* m, void* p) {
    Entry* e = lane(m->sizeclass);
    if (ROOST_LIKELY(e->slab == m)) {
      append(e, static_cast<FreeObject*>(p));
      return true;
    }
    return false;
  }

  // Adds `p`, an object of slab `m`.  Returns true when a batch had to make
  // room: *evicted then holds it, for the caller to post.
  bool add(ChunkMeta* m, void* p, Batch* evicted) {
    return !add_to_lane(m, p) && add_past_lane(m, p, evicted);
  }

  // add() for a caller whose add_to_lane() just said no.
  bool add_past_lane(ChunkMeta* m, void* p, Batch* evicted) {
    auto* o = static_cast<FreeObject*>(p);
    Set& set = sets_[set_of(m)];
    if constexpr (kLru) set.clock++;
    for (Entry& e : set.ways) {
      if (e.slab == m) {
        append(&e, o);
        if constexpr (kLru) e.last_use = set.clock;
        lanes_[m->sizeclass] = &e;
        return false;
      }
    }
    Entry* victim = pick_victim(set);
    bool full = victim->slab != nullptr && victim->tail_index != kNone;
    if (full) *evicted = take(*victim);
    victim->slab = m;
    victim->tail = &victim->first;
    if (full) {
      // Listed already (its batch was not empty): `o` starts the next one.
      freelist::set_next(victim->tail, o);
      victim->tail = o;
      victim->tail_index = 0;
    } else {
      victim->tail_index = kNone;
      append(victim, o);
    }
    if constexpr (kLru) victim->last_use = set.clock;
    lanes_[m->sizeclass] = victim;
    return full;
  }

  // Hands every cached batch to fn(const Batch&), the ways listed as they
  // started one.  With `keep`, every way keeps its slab, empty (its lane
  // still leads there); else every way is free after.
  template <typename Fn>
  void flush(Fn&& fn, bool keep) {
    for (unsigned i = 0; i < started_count_; i++) fn(take(*started_[i]));
    started_count_ = 0;
    if (!keep) {
      for (Set& set : sets_) {
        for (Entry& e : set.ways) e.slab = nullptr;
      }
    }
  }

  // The owner's view (foreign reuse, frontend/foreign_reuse.h):
  // fn(class, objects) for each batch the cache holds.
  template <typename Fn>
  void for_each_started(Fn&& fn) const {
    for (unsigned i = 0; i < started_count_; i++)
      fn(started_[i]->slab->sizeclass, started_[i]->objects());
  }
  // Foreign reuse: every batch for which keep(class, objects) says so goes
  // to fn(const Batch&), out of the cache (its way keeps its slab, empty),
  // its tail's link not written; the others stay listed, in order.
  template <typename Keep, typename Fn>
  void take_kept(Keep&& keep, Fn&& fn) {
    unsigned n = 0;
    for (unsigned i = 0; i < started_count_; i++) {
      Entry* e = started_[i];
      if (keep(e->slab->sizeclass, e->objects()))
        fn(take(*e));
      else
        started_[n++] = e;
    }
    started_count_ = n;
  }

  // For statistics, from any thread: fn(class, objects) for each batch the
  // cache holds (read while the owner may be changing them: approximate
  // until it rests, then exact).  Its objects count as freed from the
  // moment they are.
  template <typename Fn>
  ROOST_RACY_READER void for_each_batch(Fn&& fn) const {
    for (const Set& set : sets_) {
      for (const Entry& e : set.ways) {
        // Relaxed loads (ROOST_RACY_LOAD): figures, ordering nothing.
        const ChunkMeta* slab = ROOST_RACY_LOAD(e.slab, ChunkMeta* const);
        uint32_t count = ROOST_RACY_LOAD(e.tail_index, uint32_t) + 1;
        if (slab == nullptr || count == 0) continue;
        unsigned sc = ROOST_RACY_LOAD(slab->sizeclass, uint8_t);
        if (sc < sizeclass::kCount) fn(sc, count);
      }
    }
  }

  // A slab's set (looked up on a lane miss only).  The owner is read as
  // the free fast path reads it, racing a change of owner (adoption); a slab
  // whose owner changed while a batch of it was cached may start a second
  // batch in another set, and each goes home as a message of its own.
  static unsigned set_of(const ChunkMeta* m) {
    if constexpr (config::kBatchItSetBits == 0) return 0;
    uint64_t key = reinterpret_cast<uintptr_t>(ownership::owner(m));
    unsigned spread =
        static_cast<unsigned>((key * 0x9E3779B97F4A7C15ull) >> (64 - config::kBatchItSetBits));
    return (m->sizeclass + spread) & (kSets - 1);
  }

 private:
  struct Set {
    Entry ways[kWays];
    uint32_t clock;  // LRU only: adds to the set so far
  };

  // The batch of `e` (not empty); `e` stays with its slab, empty.
  static Batch take(Entry& e) {
    Batch b{e.slab, freelist::next(&e.first), e.tail, e.objects()};
    e.tail = &e.first;
    e.tail_index = kNone;
    return b;
  }

  // A free way, else one whose batch is empty, else by the policy.
  static Entry* pick_victim(Set& set) {
    Entry* victim = &set.ways[0];
    for (Entry& e : set.ways) {
      if (e.slab == nullptr) return &e;
    }
    for (Entry& e : set.ways) {
      if (e.tail_index == kNone) return &e;
      if constexpr (!kLru) {
        if (e.tail_index > victim->tail_index) victim = &e;
      } else {
        // Unsigned distance from the clock: older uses are further away.
        if (set.clock - e.last_use > set.clock - victim->last_use) victim = &e;
      }
    }
    return victim;
  }

  Set sets_[kSets] = {};
  // The ways whose batch is not empty, in the order they started it (each
  // at most once: a way is listed while its batch holds objects).
  Entry* started_[kSets * kWays] = {};
  unsigned started_count_ = 0;
  Entry none_ = {};  // never holds a slab: the lane of no class yet, and of retired slabs
  Entry* lanes_[sizeclass::kCount + 1];
};

}  // namespace roost
