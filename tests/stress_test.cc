// Randomised stress of the malloc family (malloc, calloc, realloc,
// aligned_alloc, free, malloc_usable_size) against a shadow model on one
// thread, and objects passed between threads for remote frees and
// reallocs.  Fixed seeds, plus ROOSTTEST_STRESS_SEED from the environment.
// Linked to roost::roost, or preloaded, or on the system allocator.
#include <malloc.h>

#include <chrono>
#include <cstdlib>

#include "shadow_heap.h"
#include "support.h"

using namespace roost_test;
using namespace std::chrono_literals;

TEST(Stress, RoostIsServingWhenExpected) {
  REQUIRE_ROOST();
  struct roost_stats before = stats_snapshot();
  void* p = malloc(opaque<size_t>(100));
  escape(p);
  EXPECT_GE(stats_snapshot().allocations - before.allocations, 1u);
  free(p);
}

TEST(Stress, RandomOperationsAgreeWithTheShadowModel) {
  std::vector<uint64_t> seeds = stress_seeds();
  for (uint64_t seed : seeds) {
    StressResult r = run_shadow_stress(kMallocFamily, seed, 400000, 900ms);
    EXPECT_EQ(r.error, "") << "seed " << seed;
    RecordProperty("ops_seed_" + std::to_string(seed), std::to_string(r.operations));
  }
}

TEST(Stress, ObjectsFreedAndReallocatedByOtherThreads) {
  std::string error = run_cross_thread_stress(kMallocFamily, 4, 3, 200000, 2000ms);
  EXPECT_EQ(error, "");
}
