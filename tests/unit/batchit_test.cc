// BatchIt's pieces: the batch word of a message (ds/slab_batch.h) at its
// extremes, and the remote cache's hits, evictions and flush
// (frontend/remote_cache.h).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <vector>

#include "ds/sizeclass.h"
#include "ds/slab_batch.h"
#include "frontend/remote_cache.h"

using namespace roost;

namespace {

// A slab-sized stretch of memory (untouched pages cost nothing).
struct Slab {
  explicit Slab(size_t bytes) : size(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = p == MAP_FAILED ? 0 : reinterpret_cast<uintptr_t>(p);
  }
  ~Slab() {
    if (base != 0) munmap(reinterpret_cast<void*>(base), size);
  }
  FreeObject* object(size_t index, size_t obj_size) const {
    return reinterpret_cast<FreeObject*>(base + index * obj_size);
  }
  uintptr_t base;
  size_t size;
};

// Links `order` (object indices) head -> ... -> tail, seals the batch and
// checks that opening and splicing it gives back exactly those objects.
void expect_round_trip(const Slab& slab, size_t obj_size, const std::vector<size_t>& order) {
  ASSERT_FALSE(order.empty());
  for (size_t i = 0; i + 1 < order.size(); i++)
    freelist::set_next(slab.object(order[i], obj_size), slab.object(order[i + 1], obj_size));
  FreeObject* head = slab.object(order.front(), obj_size);
  FreeObject* tail = slab.object(order.back(), obj_size);
  auto size = static_cast<uint32_t>(obj_size);
  QueueNode* msg = slab_batch::seal(head, tail, static_cast<uint32_t>(order.size()), size);
  // The message is the tail's link word.
  EXPECT_EQ(reinterpret_cast<void*>(msg), reinterpret_cast<void*>(&tail->word[config::kLinkWord]));
  EXPECT_EQ(slab_batch::tail_of(msg), tail);
  slab_batch::Batch b = slab_batch::open(msg, size);
  EXPECT_EQ(b.head, head);
  EXPECT_EQ(b.tail, tail);
  EXPECT_EQ(b.count, order.size());
  FreeObject rest{};
  FreeObject* list = slab_batch::splice(b, &rest, size);
  size_t n = 0;
  for (FreeObject* o = list; o != &rest; o = freelist::next(o), n++) {
    ASSERT_LT(n, order.size());
    ASSERT_EQ(o, slab.object(order[n], obj_size)) << "object " << n;
  }
  EXPECT_EQ(n, order.size());
}

std::vector<size_t> indices(size_t first, size_t count, bool descending) {
  std::vector<size_t> v;
  for (size_t i = 0; i < count; i++) v.push_back(descending ? first + count - 1 - i : first + i);
  return v;
}

}  // namespace

TEST(SlabBatch, OneObjectIsItsOwnHeadAndTail) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[0];
  Slab slab(sizeclass::slab_size(0));
  ASSERT_NE(slab.base, 0u);
  expect_round_trip(slab, info.size, {0});
  expect_round_trip(slab, info.size, {info.capacity - 1});
}

// A whole slab of the smallest class, in both directions: the head at one
// end, the tail at the other (the largest offsets of either sign).
TEST(SlabBatch, AFullSlabOfTheSmallestClass) {
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[0];
  Slab slab(sizeclass::slab_size(0));
  ASSERT_NE(slab.base, 0u);
  expect_round_trip(slab, info.size, indices(0, info.capacity, false));
  expect_round_trip(slab, info.size, indices(0, info.capacity, true));
}

TEST(SlabBatch, AFullSlabOfTheLargestClass) {
  unsigned sc = sizeclass::kCount - 1;
  const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
  Slab slab(sizeclass::slab_size(sc));
  ASSERT_NE(slab.base, 0u);
  expect_round_trip(slab, info.size, indices(0, info.capacity, false));
  expect_round_trip(slab, info.size, indices(0, info.capacity, true));
  expect_round_trip(slab, info.size, {info.capacity - 1, 0});
}

// Every class: the largest batch fits the count field and the largest
// offset its 32 signed bits.
TEST(SlabBatch, EveryClassFitsTheBatchWord) {
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    const sizeclass::ClassInfo& info = sizeclass::kInfo.info[sc];
    EXPECT_LE(info.capacity, slab_batch::kCountMask >> 1) << sc;  // the count's bits
    EXPECT_LT(sizeclass::slab_size(sc), size_t{1} << 31) << sc;
  }
}

// ---------------------------------------------------------------------------
// The remote cache.

namespace {

// Slab records of every class and of many owners (made-up allocator
// addresses, never followed): the cache's set is a slab's class, offset by
// a hash of its owner.
std::vector<ChunkMeta> records(size_t n) {
  std::vector<ChunkMeta> pool(n);
  for (size_t i = 0; i < n; i++) {
    pool[i].sizeclass = static_cast<uint8_t>(i % sizeclass::kCount);
    pool[i].owner = reinterpret_cast<void*>(uintptr_t{0x10000} * (i / sizeclass::kCount + 1));
  }
  return pool;
}

// Records of `pool` that all land in set 0 of the cache, each of a class
// none of the others has (so each has a lane of its own).
std::vector<ChunkMeta*> colliding_records(std::vector<ChunkMeta>& pool, size_t want) {
  std::vector<ChunkMeta*> out;
  std::vector<bool> class_taken(sizeclass::kCount);
  for (ChunkMeta& m : pool) {
    if (RemoteCache::set_of(&m) != 0 || class_taken[m.sizeclass]) continue;
    class_taken[m.sizeclass] = true;
    out.push_back(&m);
    if (out.size() == want) break;
  }
  return out;
}

struct Objects {
  std::vector<FreeObject> storage = std::vector<FreeObject>(1024);
  void* operator[](size_t i) { return &storage[i]; }
};

}  // namespace

TEST(RemoteCache, FreesOfOneSlabJoinOneBatch) {
  RemoteCache cache;
  static ChunkMeta slab;
  Objects o;
  RemoteCache::Batch evicted;
  for (size_t i = 0; i < 5; i++) EXPECT_FALSE(cache.add(&slab, o[i], &evicted));
  std::vector<RemoteCache::Batch> out;
  cache.flush([&](const RemoteCache::Batch& e) { out.push_back(e); }, false);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].slab, &slab);
  EXPECT_EQ(out[0].count, 5u);
  // In the order they were freed: the first freed is the head, the last
  // the tail (the message).
  EXPECT_EQ(out[0].head, o[0]);
  EXPECT_EQ(out[0].tail, o[4]);
  size_t n = 0;
  for (FreeObject* p = out[0].head; p != out[0].tail; p = freelist::next(p)) EXPECT_EQ(p, o[n++]);
  EXPECT_EQ(n, 4u);
  // Flushed: empty now.
  size_t again = 0;
  cache.flush([&](const RemoteCache::Batch&) { again++; }, false);
  EXPECT_EQ(again, 0u);
}

// Each class has a lane: frees of two classes, alternating, each find their
// slab's batch with no hashing (add_to_lane), and a slab of a class whose
// lane holds another slab does not.
TEST(RemoteCache, EachClassKeepsItsLane) {
  RemoteCache cache;
  // Three records of classes 3, 7 and 3 in three sets (no evictions).
  std::vector<ChunkMeta> pool = records(64 * sizeclass::kCount);
  const unsigned classes[3] = {3, 7, 3};
  std::vector<ChunkMeta*> picked;
  std::vector<bool> seen(RemoteCache::kSets);
  for (ChunkMeta& m : pool) {
    if (picked.size() == 3) break;
    if (m.sizeclass != classes[picked.size()] || seen[RemoteCache::set_of(&m)]) continue;
    seen[RemoteCache::set_of(&m)] = true;
    picked.push_back(&m);
  }
  ASSERT_EQ(picked.size(), 3u);
  ChunkMeta& a = *picked[0];
  ChunkMeta& b = *picked[1];
  ChunkMeta& c = *picked[2];
  Objects o;
  RemoteCache::Batch evicted;
  EXPECT_FALSE(cache.add_to_lane(&a, o[0]));  // nothing cached yet
  EXPECT_FALSE(cache.add(&a, o[0], &evicted));
  EXPECT_FALSE(cache.add(&b, o[1], &evicted));
  for (size_t i = 2; i < 12; i += 2) {
    EXPECT_TRUE(cache.add_to_lane(&a, o[i])) << i;
    EXPECT_TRUE(cache.add_to_lane(&b, o[i + 1])) << i;
  }
  EXPECT_EQ(cache.lane(3)->slab, &a);
  EXPECT_EQ(cache.lane(7)->slab, &b);
  EXPECT_FALSE(cache.add_to_lane(&c, o[20]));  // class 3's lane holds a
  EXPECT_FALSE(cache.add(&c, o[20], &evicted));
  EXPECT_EQ(cache.lane(3)->slab, &c);  // now c's
  std::vector<RemoteCache::Batch> out;
  cache.flush([&](const RemoteCache::Batch& e) { out.push_back(e); }, false);
  ASSERT_EQ(out.size(), 3u);
  for (const RemoteCache::Batch& e : out) {
    if (e.slab == &a) EXPECT_EQ(e.count, 6u);
    if (e.slab == &b) EXPECT_EQ(e.count, 6u);
    if (e.slab == &c) EXPECT_EQ(e.count, 1u);
  }
  // Flushed: no lane matches.
  EXPECT_FALSE(cache.add_to_lane(&a, o[30]));
  EXPECT_FALSE(cache.add_to_lane(&b, o[31]));
}

// A full set evicts to make room: the way holding the most objects (or, in
// an LRU build, the least recently used one).
TEST(RemoteCache, AFullSetEvictsOneWay) {
  std::vector<ChunkMeta> pool = records(4096);
  std::vector<ChunkMeta*> slabs = colliding_records(pool, RemoteCache::kWays + 1);
  ASSERT_EQ(slabs.size(), RemoteCache::kWays + 1) << "no records collide in set 0";
  RemoteCache cache;
  Objects o;
  RemoteCache::Batch evicted;
  size_t next = 0;
  // Way k gets k + 1 objects; the first way is the least recently used.
  for (size_t k = 0; k < RemoteCache::kWays; k++)
    for (size_t i = 0; i <= k; i++) ASSERT_FALSE(cache.add(slabs[k], o[next++], &evicted));
  ASSERT_TRUE(cache.add(slabs.back(), o[next++], &evicted));
  if constexpr (RemoteCache::kLru) {
    EXPECT_EQ(evicted.slab, slabs[0]);
    EXPECT_EQ(evicted.count, 1u);
  } else {
    EXPECT_EQ(evicted.slab, slabs[RemoteCache::kWays - 1]);
    EXPECT_EQ(evicted.count, RemoteCache::kWays);
  }
  // The newcomer and the survivors are all still cached.
  size_t batches = 0, objects = 0;
  cache.flush(
      [&](const RemoteCache::Batch& e) {
        batches++;
        objects += e.count;
        EXPECT_NE(e.slab, evicted.slab);
      },
      false);
  EXPECT_EQ(batches, RemoteCache::kWays);
  EXPECT_EQ(objects + evicted.count, next);
}

// A post keeps each way with its slab, empty: the next free of that slab
// takes its lane again (no hashing), and a way keeps its slab until another
// slab of its set needs it.  An empty way is taken before one holding a
// batch is evicted, and gives up nothing.
TEST(RemoteCache, APostKeepsTheWaysThatHadBatches) {
  std::vector<ChunkMeta> pool = records(4096);
  std::vector<ChunkMeta*> slabs = colliding_records(pool, RemoteCache::kWays + 1);
  ASSERT_EQ(slabs.size(), RemoteCache::kWays + 1) << "no records collide in set 0";
  RemoteCache cache;
  Objects o;
  RemoteCache::Batch evicted;
  size_t next = 0;
  for (size_t k = 0; k < RemoteCache::kWays; k++)
    ASSERT_FALSE(cache.add(slabs[k], o[next++], &evicted));
  size_t batches = 0;
  cache.flush([&](const RemoteCache::Batch& b) { batches += b.count == 1; }, true);
  EXPECT_EQ(batches, RemoteCache::kWays);
  // Kept: the lanes still lead to the (empty) ways.
  for (size_t k = 0; k < RemoteCache::kWays; k++) {
    EXPECT_EQ(cache.lane(slabs[k]->sizeclass)->slab, slabs[k]);
    EXPECT_EQ(cache.lane(slabs[k]->sizeclass)->objects(), 0u);
  }
  EXPECT_TRUE(cache.add_to_lane(slabs[0], o[next++]));
  // The newcomer takes an empty way, and no batch comes out.
  EXPECT_FALSE(cache.add(slabs.back(), o[next++], &evicted));
  std::vector<RemoteCache::Batch> out;
  cache.flush([&](const RemoteCache::Batch& b) { out.push_back(b); }, true);
  ASSERT_EQ(out.size(), 2u);
  for (const RemoteCache::Batch& b : out) {
    EXPECT_TRUE(b.slab == slabs[0] || b.slab == slabs.back());
    EXPECT_EQ(b.count, 1u);
    EXPECT_EQ(b.head, b.tail);
  }
  // Nothing freed since: no batch, and the ways still hold their slabs
  // (slabs[0]'s, and the newcomer's in place of slabs[1]'s, the empty one).
  cache.flush([&](const RemoteCache::Batch&) { ADD_FAILURE() << "an empty batch"; }, true);
  EXPECT_TRUE(cache.add_to_lane(slabs[0], o[next++]));
  EXPECT_TRUE(cache.add_to_lane(slabs.back(), o[next++]));
  EXPECT_FALSE(cache.add_to_lane(slabs[1], o[next++]));
  for (size_t k = 2; k < RemoteCache::kWays; k++)
    EXPECT_TRUE(cache.add_to_lane(slabs[k], o[next++]));
  // A flush that lets the ways go: the lanes lead nowhere after.
  out.clear();
  cache.flush([&](const RemoteCache::Batch& b) { out.push_back(b); }, false);
  EXPECT_EQ(out.size(), RemoteCache::kWays);
  EXPECT_FALSE(cache.add_to_lane(slabs[0], o[next++]));
  EXPECT_FALSE(cache.add_to_lane(slabs.back(), o[next++]));
}

// One owner's slabs of as many classes as the cache has sets take a set
// each: a thread freeing objects of many sizes from one other thread (a
// consumer of one producer) evicts no batch for want of a way.
TEST(RemoteCache, OneOwnersSlabsOfDifferentClassesTakeSetsOfTheirOwn) {
  if (RemoteCache::kSets > sizeclass::kCount) GTEST_SKIP() << "more sets than classes";
  std::vector<ChunkMeta> pool(RemoteCache::kWays * RemoteCache::kSets);
  for (size_t i = 0; i < pool.size(); i++) {
    pool[i].owner = reinterpret_cast<void*>(uintptr_t{0x7f0000});  // one owner
    pool[i].sizeclass = static_cast<uint8_t>(i % RemoteCache::kSets);
  }
  std::vector<bool> seen(RemoteCache::kSets);
  for (size_t i = 0; i < RemoteCache::kSets; i++) {
    unsigned set = RemoteCache::set_of(&pool[i]);
    EXPECT_FALSE(seen[set]) << "classes " << i << " and another share set " << set;
    seen[set] = true;
  }
  // As many slabs of each class as a set has ways (an old one and its
  // successors): the set holds them all.
  RemoteCache cache;
  Objects o;
  RemoteCache::Batch evicted;
  for (size_t i = 0; i < pool.size(); i++) EXPECT_FALSE(cache.add(&pool[i], o[i], &evicted)) << i;
  size_t batches = 0;
  cache.flush([&](const RemoteCache::Batch&) { batches++; }, false);
  EXPECT_EQ(batches, pool.size());
}

TEST(RemoteCache, DifferentSetsDoNotEvictEachOther) {
  std::vector<ChunkMeta> pool = records(256);
  RemoteCache cache;
  Objects o;
  RemoteCache::Batch evicted;
  // One record per set, the whole cache's worth of sets: no evictions.
  std::vector<bool> seen(RemoteCache::kSets);
  size_t added = 0;
  for (ChunkMeta& m : pool) {
    unsigned set = RemoteCache::set_of(&m);
    if (seen[set]) continue;
    seen[set] = true;
    EXPECT_FALSE(cache.add(&m, o[added++], &evicted));
  }
  EXPECT_EQ(added, RemoteCache::kSets) << "the hash misses some sets";
  size_t batches = 0;
  cache.flush([&](const RemoteCache::Batch&) { batches++; }, false);
  EXPECT_EQ(batches, added);
}

// Runs of frees into one slab take the way of the previous add without
// hashing; a way that was flushed, or evicted and taken by another slab,
// must not take them.  Random runs over more colliding slabs than ways
// (evictions all the time), with flushes in between: every batch that comes
// out holds exactly the objects added for its slab since its last batch, in
// reverse order of freeing, and no object is lost or doubled.
TEST(RemoteCache, EveryBatchHoldsExactlyItsSlabsObjects) {
  std::vector<ChunkMeta> pool = records(4096);
  std::vector<ChunkMeta*> slabs = colliding_records(pool, RemoteCache::kWays + 2);
  ASSERT_EQ(slabs.size(), RemoteCache::kWays + 2) << "no records collide in set 0";
  RemoteCache cache;
  std::vector<FreeObject> objects(20000);
  std::vector<std::vector<FreeObject*>> pending(slabs.size());  // added, not out yet
  size_t out_objects = 0, batches = 0;
  auto take = [&](const RemoteCache::Batch& e) {
    size_t s = 0;
    while (s < slabs.size() && slabs[s] != e.slab) s++;
    ASSERT_LT(s, slabs.size()) << "a batch of an unknown slab";
    std::vector<FreeObject*>& want = pending[s];
    ASSERT_NE(e.count, 0u) << "an empty batch, slab " << s;
    ASSERT_EQ(e.count, want.size()) << "slab " << s;
    // In the order they were added: the head first, the tail last.
    FreeObject* p = e.head;
    for (size_t i = 0; i < want.size(); i++, p = freelist::next(p)) {
      ASSERT_EQ(p, want[i]) << "slab " << s << ", object " << i;
      if (i + 1 == want.size()) EXPECT_EQ(p, e.tail);
    }
    out_objects += want.size();
    batches++;
    want.clear();
  };
  uint64_t rng = 0x243f6a8885a308d3ull;
  auto next_random = [&rng](uint64_t bound) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (rng >> 33) % bound;
  };
  size_t added = 0;
  while (added < objects.size()) {
    size_t s = next_random(slabs.size());
    size_t run = 1 + next_random(6);
    for (size_t i = 0; i < run && added < objects.size(); i++) {
      FreeObject* o = &objects[added++];
      pending[s].push_back(o);
      RemoteCache::Batch evicted;
      if (cache.add(slabs[s], o, &evicted)) {
        ASSERT_NE(evicted.slab, slabs[s]);
        take(evicted);
      }
    }
    if (next_random(50) == 0) cache.flush(take, next_random(2) == 0);
  }
  cache.flush(take, false);
  EXPECT_EQ(out_objects, objects.size());
  EXPECT_GT(batches, 1000u);  // evictions happened throughout
  for (const auto& p : pending) EXPECT_TRUE(p.empty());
}
