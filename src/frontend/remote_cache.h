// frontend/remote_cache.h — BatchIt: remote frees collected by slab.
//
// A small set-associative cache in front of the outbox, keyed by slab: a
// free of another allocator's object joins the batch of its slab if that
// slab is cached (a local push), else takes a way of its set, evicting one
// batch if the set is full.  An evicted batch goes to the outbox as one
// message, which its owner splices into the slab in constant time
// (ds/slab_batch.h).  Sets are chosen by a multiply-shift hash of the slab's
// metadata address.  Eviction policy (config::kBatchItEviction): the way
// holding the most objects (the BatchIt paper's), or the least recently used.
//
// Owns: the cached batches.  Must never: post anything itself (the caller
// files what comes out in its outbox), or allocate.
#pragma once

#include "backend/chunk_meta.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/bitset.h"
#include "ds/slab_batch.h"

namespace roost {

class RemoteCache {
 public:
  static constexpr unsigned kSets = 1u << config::kBatchItSetBits;
  static constexpr unsigned kWays = config::kBatchItWays;

  static constexpr bool kLru = config::kBatchItEviction == config::Eviction::kLeastRecentlyUsed;

  constexpr RemoteCache() = default;
  RemoteCache(const RemoteCache&) = delete;  // last_ points into the cache itself
  RemoteCache& operator=(const RemoteCache&) = delete;

  struct Entry {
    ChunkMeta* slab;  // nullptr: the way is free
    FreeObject* head;
    FreeObject* tail;
    uint32_t count;
    uint32_t last_use;  // LRU only: the set's clock at the last add
  };

  // The shortcut for a run of frees into one slab (objects allocated
  // together, freed together): if the way of the previous add holds slab
  // `m`, pushes `p` there and returns true, with no hashing.  That way is
  // the most recently used of its set, so LRU order needs no update.  An
  // empty cache never matches (its ways hold no slab), so with BatchIt off
  // this is one failed compare.
  ROOST_INLINE bool add_to_last(ChunkMeta* m, void* p) {
    if (ROOST_LIKELY(last_->slab == m)) {
      push(last_, static_cast<FreeObject*>(p));
      return true;
    }
    return false;
  }

  // Adds `p`, an object of slab `m`.  Returns true when a batch had to make
  // room: *evicted then holds it, for the caller to post.
  bool add(ChunkMeta* m, void* p, Entry* evicted) {
    return !add_to_last(m, p) && add_past_last(m, p, evicted);
  }

  // add() for a caller whose add_to_last() just said no.
  bool add_past_last(ChunkMeta* m, void* p, Entry* evicted) {
    auto* o = static_cast<FreeObject*>(p);
    unsigned index = set_of(m);
    Set& set = sets_[index];
    if constexpr (kLru) set.clock++;
    for (Entry& e : set.ways) {
      if (e.slab == m) {
        push(&e, o);
        if constexpr (kLru) e.last_use = set.clock;
        last_ = &e;
        return false;
      }
    }
    Entry* victim = pick_victim(set);
    bool full = victim->slab != nullptr;
    if (full)
      *evicted = *victim;
    else
      filled_.insert(index);
    victim->slab = m;
    victim->head = victim->tail = o;
    victim->count = 1;
    if constexpr (kLru) victim->last_use = set.clock;
    last_ = victim;
    return full;
  }

  // Hands every cached batch to fn(const Entry&) and empties the cache.
  // Only sets that took a batch since the last flush are looked at.
  template <typename Fn>
  void flush(Fn&& fn) {
    filled_.for_each([&](unsigned s) {
      for (Entry& e : sets_[s].ways) {
        if (e.slab == nullptr) continue;
        fn(e);
        e.slab = nullptr;
      }
    });
    filled_.clear();
  }

  static unsigned set_of(const ChunkMeta* m) {
    if constexpr (config::kBatchItSetBits == 0) return 0;
    uint64_t key = reinterpret_cast<uintptr_t>(m) >> 6;  // records are 64-byte lines
    return static_cast<unsigned>((key * 0x9E3779B97F4A7C15ull) >> (64 - config::kBatchItSetBits));
  }

 private:
  struct Set {
    Entry ways[kWays];
    uint32_t clock;  // LRU only: adds to the set so far
  };

  static ROOST_INLINE void push(Entry* e, FreeObject* o) {
    freelist::set_next(o, e->head);
    e->head = o;
    e->count++;
  }

  static Entry* pick_victim(Set& set) {
    Entry* victim = &set.ways[0];
    for (Entry& e : set.ways) {
      if (e.slab == nullptr) return &e;
      if constexpr (!kLru) {
        if (e.count > victim->count) victim = &e;
      } else {
        // Unsigned distance from the clock: older uses are further away.
        if (set.clock - e.last_use > set.clock - victim->last_use) victim = &e;
      }
    }
    return victim;
  }

  Set sets_[kSets] = {};
  BitSet<kSets> filled_;  // the sets that took a batch since the last flush
  // The way of the latest add: always a way of this cache, so the check in
  // add() needs no null test (a flushed or reused way no longer matches).
  Entry* last_ = &sets_[0].ways[0];
};

}  // namespace roost
