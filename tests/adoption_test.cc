// Slab adoption (src/frontend/adoption.h): the partly used slabs of an
// exited thread's allocator taken over by the threads that need a slab of
// their class, or that free objects into them.  Through the roost_* API
// (roost::prefixed), in every tree, ThreadSanitizer's and AddressSanitizer's
// too:
//
//   - a thread that needs a slab takes an exited thread's half-used one: its
//     objects land in the holes the exited thread left;
//   - a thread that frees an exited thread's objects adopts their slabs, so
//     those frees are its own (no message), and the slab's next objects are
//     its own to hand out;
//   - generations of threads whose objects third threads free while the
//     threads exit and others adopt their slabs, with a fork in the middle:
//     every object intact, handed out once, and the counters balance.
//
// A refill adopts by default (ROOST_ADOPT=1, adoption.prefixed.refills),
// a free too with ROOST_ADOPT=2 (experimental: adoption.prefixed), and
// nothing is adopted with ROOST_ADOPT=0 (adoption.prefixed.off): the first
// two tests check each moment where it is on and that nothing is adopted
// where it is off (their assertions fail without the mechanism).  Under full
// offload
// (ROOST_OFFLOAD=1) threads allocate from the service's rings and free
// others' objects onto them, so the first two do not apply there.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <latch>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

using namespace roost_test;

namespace {

// Does a refill adopt (ROOST_ADOPT=1, the default, or 2)?  A free (2)?
bool refills_adopt() { return adopt_level() >= 1; }
bool frees_adopt() { return adopt_level() >= 2; }

// Adoption takes the pool's lock only when it is free (it never waits), and
// the service thread takes that lock to deliver the exited thread's mail:
// a refill or a free that finds it held takes other memory, or sends its
// object home, instead.  So how much is adopted is certain only with the
// service off (adoption.prefixed.service_off), where no other thread takes
// the lock while these tests run; with it on, what the tests check is
// that the objects come through whole and the counts add up.
bool pool_lock_uncontended() { return !env_option_on("ROOST_SERVICE", true); }

// Objects of this size share a class (roost's 1 KiB class).
constexpr size_t kSize = 1000;

}  // namespace

TEST(Adoption, ARefillTakesAnExitedThreadsHalfUsedSlab) {
  if (offload_on()) GTEST_SKIP() << "under full offload threads allocate from the service's rings";
  // The adopter binds its allocator first (an object of another class), so
  // it cannot be handed the exited thread's allocator whole.
  std::latch adopter_bound(1), exited(1);
  std::vector<void*> kept;      // the exited thread's objects still in use
  std::set<uintptr_t> holes;    // those it freed
  std::vector<void*> adopters;  // what the adopter then allocated
  struct roost_stats before {};
  std::thread adopter([&] {
    void* bind = roost_malloc(16);
    before = stats_snapshot();
    adopter_bound.count_down();
    exited.wait();
    for (size_t i = 0; i < holes.size(); i++) adopters.push_back(roost_malloc(kSize));
    roost_free(bind);
  });
  adopter_bound.wait();
  std::thread old([&] {
    std::vector<void*> all;
    for (int i = 0; i < 256; i++) all.push_back(roost_malloc(kSize));
    for (size_t i = 0; i < all.size(); i++) {
      if (i % 2 == 0) {
        kept.push_back(all[i]);
      } else {
        holes.insert(reinterpret_cast<uintptr_t>(all[i]));
        roost_free(all[i]);
      }
    }
  });
  old.join();
  exited.count_down();
  adopter.join();
  struct roost_stats after = stats_snapshot();

  size_t in_holes = 0;
  for (void* p : adopters) in_holes += holes.count(reinterpret_cast<uintptr_t>(p));
  RecordProperty("objects_in_holes", std::to_string(in_holes));
  RecordProperty("slabs_adopted", std::to_string(after.slabs_adopted - before.slabs_adopted));
  if (refills_adopt()) {
    // Every slab of the exited thread's had free objects: the adopter's
    // refills take them before any other memory.
    if (pool_lock_uncontended()) {
      EXPECT_GE(in_holes, adopters.size() * 3 / 4);
      EXPECT_GE(after.slabs_adopted - before.slabs_adopted, 2u);
    }
  } else {
    EXPECT_EQ(in_holes, 0u);
    EXPECT_EQ(after.slabs_adopted, before.slabs_adopted);
  }
  std::thread cleanup([&] {
    for (void* p : adopters) roost_free(p);
    for (void* p : kept) roost_free(p);
    roost_trim();
  });
  cleanup.join();
}

TEST(Adoption, FreeingAnExitedThreadsObjectsAdoptsTheirSlabs) {
  if (offload_on()) GTEST_SKIP() << "under full offload others' objects go to the service's ring";
  constexpr int kObjects = 512;
  std::vector<void*> objects;
  // The freer binds its allocator first, so it cannot be handed the exited
  // thread's allocator whole (whose frees would then be local anyway).
  std::latch freer_bound(1), exited(1);
  struct roost_stats before {
  }, after{};
  bool intact = true;
  std::thread freer([&] {
    void* bind = roost_malloc(16);
    before = stats_snapshot();
    freer_bound.count_down();
    exited.wait();
    for (int i = 0; i < kObjects; i++) {
      intact &= check_pattern(objects[i], 200, static_cast<uint64_t>(i));
      roost_free(objects[i]);
    }
    after = stats_snapshot();
    roost_free(bind);
    roost_trim();
  });
  freer_bound.wait();
  std::thread old([&] {
    for (int i = 0; i < kObjects; i++) {
      void* p = roost_malloc(200);
      fill_pattern(p, 200, static_cast<uint64_t>(i));
      objects.push_back(p);
    }
  });
  old.join();
  exited.count_down();
  freer.join();
  EXPECT_TRUE(intact);
  uint64_t remote = after.remote_frees - before.remote_frees;
  uint64_t adopted = after.slabs_adopted - before.slabs_adopted;
  RecordProperty("remote_frees", std::to_string(remote));
  RecordProperty("slabs_adopted", std::to_string(adopted));
  if (frees_adopt()) {
    // One free per slab finds its owner parked and adopts it; the rest of
    // the slab's frees are local.
    if (pool_lock_uncontended()) {
      EXPECT_GE(adopted, 1u);
      EXPECT_LE(remote, static_cast<uint64_t>(kObjects) / 8);
    } else {
      EXPECT_LE(remote, static_cast<uint64_t>(kObjects));
    }
  } else {
    EXPECT_EQ(adopted, 0u);
    EXPECT_EQ(remote, static_cast<uint64_t>(kObjects));
  }
}

namespace {

// An object in flight between a worker and a freer: its tag and size.
struct Handed {
  void* p;
  size_t size;
  uint64_t tag;
};

// A queue of objects for the freers (a mutex: this tests the allocator, not
// the queue).
class Handoff {
 public:
  void put(const Handed& h) {
    std::lock_guard<std::mutex> lock(m_);
    q_.push_back(h);
  }
  bool take(Handed* h) {
    std::lock_guard<std::mutex> lock(m_);
    if (q_.empty()) return false;
    *h = q_.front();
    q_.pop_front();
    return true;
  }

 private:
  std::mutex m_;
  std::deque<Handed> q_;
};

}  // namespace

TEST(Adoption, GenerationsWhoseObjectsOthersFreeLoseNothing) {
  // Generations of workers (more threads than cores): each allocates, keeps
  // and frees some objects itself, and hands the rest to freer threads that
  // check and free them late, after the worker has exited; the next
  // generation adopts the exited workers' slabs meanwhile.  A fork in the
  // middle: the child allocates and frees across size classes and exits.
  const int kGenerations = kTsan ? 12 : 24;
  constexpr int kWorkers = 4;
  constexpr int kFreers = 3;
  const int kObjectsPerWorker = kTsan ? 3000 : 8000;
  Handoff handoff;
  std::atomic<bool> workers_done{false};
  std::atomic<uint64_t> bad{0}, freed_by_freers{0}, handed{0};
  std::string fork_result = "not run";

  struct roost_stats before {};
  std::thread first([&] { before = stats_snapshot(); });
  first.join();

  std::vector<std::thread> freers;
  for (int f = 0; f < kFreers; f++) {
    freers.emplace_back([&, f] {
      std::mt19937_64 rng(f + 1);
      for (;;) {
        Handed h;
        if (!handoff.take(&h)) {
          if (workers_done.load(std::memory_order_acquire) && !handoff.take(&h)) break;
          std::this_thread::yield();
          continue;
        }
        if (!check_pattern(h.p, h.size, h.tag)) bad.fetch_add(1);
        roost_free(h.p);
        freed_by_freers.fetch_add(1, std::memory_order_relaxed);
        // Freers lag behind: their allocations are small and few.
        if (rng() % 64 == 0) roost_free(roost_malloc(16 + rng() % 512));
      }
    });
  }
  for (int g = 0; g < kGenerations; g++) {
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; w++) {
      workers.emplace_back([&, g, w] {
        std::mt19937_64 rng(static_cast<uint64_t>(g) * 131 + static_cast<uint64_t>(w));
        std::vector<Handed> mine;
        for (int i = 0; i < kObjectsPerWorker; i++) {
          size_t size = 16 + rng() % 2048;
          uint64_t tag = static_cast<uint64_t>(g) << 40 | static_cast<uint64_t>(w) << 32 |
                         static_cast<uint64_t>(i);
          void* p = roost_malloc(size);
          if (p == nullptr) {
            bad.fetch_add(1);
            continue;
          }
          fill_pattern(p, size, tag);
          mine.push_back({p, size, tag});
          // Churn: free one of its own now and then.
          if (mine.size() > 64 && rng() % 3 == 0) {
            size_t k = rng() % mine.size();
            if (!check_pattern(mine[k].p, mine[k].size, mine[k].tag)) bad.fetch_add(1);
            roost_free(mine[k].p);
            mine[k] = mine.back();
            mine.pop_back();
          }
        }
        // The rest outlive this thread: the freers have them.
        for (const Handed& h : mine) handoff.put(h);
        handed.fetch_add(mine.size());
      });
    }
    if (g == kGenerations / 2) {
      // Fork while workers allocate and freers free.
      std::thread forker([&] {
        ChildResult r = run_in_child([] {
          std::vector<void*> v;
          for (int i = 0; i < 2000; i++) v.push_back(roost_malloc(16 + (i * 37) % 2048));
          for (void* p : v) roost_free(p);
          struct roost_stats s;
          child_check(roost_stats(&s) == 0, "roost_stats in the child");
        });
        fork_result = r.exited && r.exit_code == 0 ? "" : r.describe();
      });
      forker.join();
    }
    for (std::thread& t : workers) t.join();
  }
  workers_done.store(true, std::memory_order_release);
  for (std::thread& t : freers) t.join();

  struct roost_stats after {};
  std::thread last([&] {
    roost_trim();
    after = stats_snapshot();
  });
  last.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(freed_by_freers.load(), handed.load());
  EXPECT_EQ(fork_result, "") << "the forked child";
  RecordProperty("slabs_adopted", std::to_string(after.slabs_adopted - before.slabs_adopted));
  // Where frees adopt, the freers' first free into each exited worker's
  // slab does.  (Adoption at a refill alone depends on a worker's refill
  // coming while an exited one's slab is offered and the pool lock free: it
  // is checked by ARefillTakesAnExitedThreadsHalfUsedSlab.)
  if (frees_adopt() && !offload_on()) {
    EXPECT_GT(after.slabs_adopted, before.slabs_adopted);
  }
  RecordProperty("foreign_kept", std::to_string(after.foreign_kept - before.foreign_kept));
  if (kept_expected()) {
    // adoption.prefixed.foreign_reuse: the freers kept exited workers'
    // objects for reuse while their slabs were adopted.
    EXPECT_GT(after.foreign_kept, before.foreign_kept) << "no object was kept for reuse";
  }
  // Every object allocated since was freed once, and every message came
  // home: nothing lost, nothing freed twice, however slabs changed hands.
  EXPECT_EQ(after.allocations - before.allocations, after.frees - before.frees);
  EXPECT_EQ(after.messages_sent, after.messages_received);
  EXPECT_EQ(after.slab_batches_sent, after.slab_batches_received);
}
