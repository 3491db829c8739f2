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

// The hardened build checks the byte before a small object at its free,
// realloc and malloc_usable_size: the last byte of the slot before, which
// roost keeps 0 or its canary key's top byte whatever that slot's state
// (ds/slack_canary.h), while another thread may be allocating, resizing,
// freeing or sending home the object there.  Threads (more than the cores)
// allocate runs of neighbouring objects of a 16-byte class and of larger
// ones (sizes whose canary word leaves no slack among them) and trade them
// through shared slots, so that each is freed, resized in place or asked
// its size by any thread while its neighbours change hands too: nothing
// may be reported, in a child (whose stderr says what was).  Every build
// runs it; the hardened one is the one with the check.
TEST(Stress, NeighboursFreedOnOtherThreadsWhileTheirNeighboursChange) {
  constexpr int kThreads = 6;
  constexpr size_t kSlots = 2048;
  constexpr uint64_t kMinOps = 20000;
  constexpr uint64_t kMaxOps = 400000;
  ChildResult r = run_in_child(
      [] {
        // 8: the 16-byte class (canary word or not); 56 and 2040: no slack
        // before the hardened build's canary word; 100 and 1000: some.
        static constexpr size_t kSizes[] = {8, 8, 56, 100, 1000, 2040};
        std::vector<std::atomic<void*>> slots(kSlots);
        const auto deadline = std::chrono::steady_clock::now() + 2000ms;
        std::vector<std::thread> pool;
        for (int t = 0; t < kThreads; t++) {
          pool.emplace_back([&slots, deadline, t] {
            uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(t + 1);
            auto next = [&x] {
              x ^= x << 13;
              x ^= x >> 7;
              x ^= x << 17;
              return x;
            };
            for (uint64_t op = 0; op < kMaxOps;) {
              if (op >= kMinOps && std::chrono::steady_clock::now() > deadline) break;
              size_t size = kSizes[next() % (sizeof(kSizes) / sizeof(kSizes[0]))];
              // A run of objects of one size: neighbours in their slab.
              for (uint64_t run = 1 + next() % 8; run > 0; run--, op++) {
                auto* p = static_cast<char*>(malloc(size));
                child_check(p != nullptr, "malloc returned NULL");
                p[0] = 1;
                p[size - 1] = 2;
                void* out = slots[next() % kSlots].exchange(p, std::memory_order_acq_rel);
                if (out == nullptr) continue;
                switch (next() % 8) {
                  case 0:
                    escape(reinterpret_cast<void*>(malloc_usable_size(out)));
                    break;
                  case 1: {
                    // Down to half its size: in place.
                    size_t usable = malloc_usable_size(out);
                    out = realloc(out, usable - next() % (usable / 2 + 1));
                    child_check(out != nullptr, "realloc returned NULL");
                    break;
                  }
                  default:
                    break;
                }
                free(out);
              }
            }
          });
        }
        for (std::thread& th : pool) th.join();
        for (std::atomic<void*>& s : slots) free(s.load(std::memory_order_relaxed));
      },
      120);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_EQ(r.err, "");
}
