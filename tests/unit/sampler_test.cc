// The heap profiler's sample points per size class (frontend/sampler.h):
// a point is the allocation count of the object that holds it; a refill
// whose list cannot reach it (a list holds at most a slab's capacity) is
// told so by one comparison, and every refill looks until the sampler has
// started; objects a cut holds back come out once; a few spare chunks of
// sampled objects are kept for every thread, and all of them released.
#include "frontend/sampler.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "ds/freelist.h"
#include "ds/sizeclass.h"

using namespace roost;

namespace {

constexpr unsigned kClass = sizeclass::from_size(64);
const uint64_t kSize = sizeclass::kInfo.info[kClass].size;
const uint64_t kCapacity = sizeclass::kInfo.info[kClass].capacity;

}  // namespace

TEST(Sampler, UntilStartedEveryRefillLooks) {
  Sampler s;
  EXPECT_FALSE(s.started());
  for (uint64_t allocs : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40})
    EXPECT_FALSE(s.beyond_reach(kClass, allocs)) << allocs;
}

TEST(Sampler, APointIsTheCountOfTheObjectHoldingIt) {
  ASSERT_GT(kCapacity, 20u);
  Sampler s;
  auto allocs = [](unsigned sc) { return sc == kClass ? uint64_t{1000} : 0; };
  // Ten objects end before the point; the eleventh holds it.
  s.start(allocs, [](unsigned sc) { return sc == kClass ? 10 * kSize + kSize - 1 : 1u << 30; });
  ASSERT_TRUE(s.started());
  EXPECT_EQ(s.ahead(kClass, 1000), 10);
  EXPECT_EQ(s.ahead(kClass, 1010), 0);
  EXPECT_EQ(s.ahead(kClass, 1012), -2);  // passed (a thread inside the profiler)
  EXPECT_FALSE(s.beyond_reach(kClass, 1000));
  // Another class's point is its own.
  unsigned other = kClass + 1;
  EXPECT_EQ(s.ahead(other, 0),
            static_cast<int64_t>((1u << 30) / sizeclass::kInfo.info[other].size));
}

TEST(Sampler, ARefillIsBeyondReachWhileNoSlabsWorthOfObjectsGetsThere) {
  Sampler s;
  s.start([](unsigned) { return uint64_t{0}; }, [](unsigned) { return uint64_t{1} << 40; });
  EXPECT_TRUE(s.beyond_reach(kClass, 0));
  // The point `kCapacity + 5` objects from count 5000: a refill at count A
  // hands out at most the objects A .. A + kCapacity - 1.
  s.restart(kClass, 5000, (kCapacity + 5) * kSize);
  EXPECT_EQ(s.ahead(kClass, 5000), static_cast<int64_t>(kCapacity) + 5);
  EXPECT_TRUE(s.beyond_reach(kClass, 5000));
  EXPECT_TRUE(s.beyond_reach(kClass, 5005));
  EXPECT_FALSE(s.beyond_reach(kClass, 5006));
  EXPECT_FALSE(s.beyond_reach(kClass, 5000 + kCapacity + 5));
  EXPECT_FALSE(s.beyond_reach(kClass, 5000 + kCapacity + 6));
  // A point drawn at zero bytes is the next object's.
  s.restart(kClass, 7000, 0);
  EXPECT_EQ(s.ahead(kClass, 7000), 0);
  EXPECT_FALSE(s.beyond_reach(kClass, 7000));
}

TEST(Sampler, HeldObjectsComeOutOnceAndGoBackWithTheFastLists) {
  Sampler s;
  alignas(16) unsigned char objects[3][64] = {};
  FreeObject* a = reinterpret_cast<FreeObject*>(objects[0]);
  FreeObject* b = reinterpret_cast<FreeObject*>(objects[1]);
  FreeObject* c = reinterpret_cast<FreeObject*>(objects[2]);
  freelist::set_next(a, b);
  freelist::set_next(b, nullptr);
  s.hold(kClass, a, 2);
  Sampler::Held held = s.take_held(kClass);
  EXPECT_EQ(held.head, a);
  EXPECT_EQ(held.length, 2u);
  held = s.take_held(kClass);
  EXPECT_EQ(held.head, nullptr);
  EXPECT_EQ(held.length, 0u);
  // Released: in front of the class's fast list.
  s.hold(kClass, a, 2);
  FreeObject* fast[sizeclass::kCount] = {};
  fast[kClass] = c;
  freelist::set_next(c, nullptr);
  s.release_held(fast, [](unsigned, FreeObject* o) { return freelist::next(o); });
  EXPECT_EQ(fast[kClass], a);
  EXPECT_EQ(freelist::next(b), c);
  EXPECT_EQ(s.take_held(kClass).head, nullptr);
}

TEST(Sampler, KeepsAFewSpareChunksForEveryThreadAndReleasesThemAll) {
  EXPECT_EQ(Sampler::take_spare(), nullptr);
  ChunkMeta chunks[Sampler::kSpareChunks + 1] = {};
  for (unsigned i = 0; i < Sampler::kSpareChunks; i++)
    EXPECT_TRUE(Sampler::keep_spare(&chunks[i])) << i;
  EXPECT_FALSE(Sampler::keep_spare(&chunks[Sampler::kSpareChunks])) << "kept more than its few";
  // Another thread takes one this thread kept.
  ChunkMeta* taken = nullptr;
  std::thread([&] { taken = Sampler::take_spare(); }).join();
  EXPECT_GE(taken, &chunks[0]);
  EXPECT_LT(taken, &chunks[Sampler::kSpareChunks]);
  bool seen[Sampler::kSpareChunks] = {};
  seen[taken - chunks] = true;
  unsigned released = 0;
  EXPECT_TRUE(Sampler::release_spares([&](ChunkMeta* m) {
    ASSERT_GE(m, &chunks[0]);
    ASSERT_LT(m, &chunks[Sampler::kSpareChunks]);
    EXPECT_FALSE(seen[m - chunks]) << "a chunk came out twice";
    seen[m - chunks] = true;
    released++;
  }));
  EXPECT_EQ(released, Sampler::kSpareChunks - 1);
  EXPECT_EQ(Sampler::take_spare(), nullptr);
  EXPECT_FALSE(Sampler::release_spares([](ChunkMeta*) { ADD_FAILURE() << "none left"; }));
}
