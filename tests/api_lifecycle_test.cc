// Early and late calls around the allocator's lifetime and threads': malloc
// from a static constructor (static_init.cc), from thread_local destructors
// and pthread key destructors after a thread's allocator may be gone, frees
// of objects whose owning thread has exited, many threads created and
// exited, and fork while other threads allocate.  Cases that need a whole
// process of their own (shared libraries' constructors, exit handlers, exit
// while other threads allocate, a pthread key older than roost's, plugins)
// are in tests/lifecycle.
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "static_init.h"
#include "support.h"

using namespace roost_test;

namespace {

// Objects handed from one thread to another: pointer, size, pattern id.
struct Handoff {
  void* p;
  size_t size;
  uint64_t id;
};

std::mutex g_handoff_mutex;
std::vector<Handoff> g_handoffs;
std::atomic<int> g_failures{0};
std::atomic<uint64_t> g_next_id{1};

void hand_off(void* p, size_t size, uint64_t id) {
  std::lock_guard<std::mutex> lock(g_handoff_mutex);
  g_handoffs.push_back({p, size, id});
}

// Allocates an object, fills it, hands it to the main thread.
void allocate_and_hand_off(size_t size) {
  void* p = malloc(size);
  if (p == nullptr) {
    g_failures++;
    return;
  }
  uint64_t id = g_next_id++;
  fill_pattern(p, size, id);
  hand_off(p, size, id);
}

// Checks and frees every handed-off object; returns how many were damaged.
int free_handoffs() {
  std::vector<Handoff> taken;
  {
    std::lock_guard<std::mutex> lock(g_handoff_mutex);
    taken.swap(g_handoffs);
  }
  int damaged = 0;
  for (const Handoff& h : taken) {
    if (!check_pattern(h.p, h.size, h.id)) damaged++;
    free(h.p);
  }
  return damaged;
}

// Allocate, fill, check and free a few objects of assorted sizes.
bool churn(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Handoff> v;
  for (int i = 0; i < count; i++) {
    size_t n = 1 + rng() % (i % 10 == 0 ? 100000 : 600);
    void* p = malloc(n);
    if (p == nullptr) return false;
    fill_pattern(p, n, seed + static_cast<uint64_t>(i));
    v.push_back({p, n, seed + static_cast<uint64_t>(i)});
  }
  bool ok = true;
  for (const Handoff& h : v) {
    ok &= check_pattern(h.p, h.size, h.id);
    free(h.p);
  }
  return ok;
}

// A thread_local object whose destructor allocates and frees, frees an
// object the thread allocated earlier, and hands a new object out.
struct ThreadExitAllocator {
  void* early = nullptr;
  size_t early_size = 0;
  uint64_t early_id = 0;
  std::atomic<int>* destructor_runs = nullptr;

  ~ThreadExitAllocator() {
    if (early == nullptr || !check_pattern(early, early_size, early_id)) g_failures++;
    free(early);
    if (!churn(50, 777)) g_failures++;
    auto* s = new std::string(300, 't');
    delete s;
    allocate_and_hand_off(96);
    allocate_and_hand_off(70000);
    if (destructor_runs != nullptr) (*destructor_runs)++;
  }
};

thread_local ThreadExitAllocator t_exit_allocator;

}  // namespace

TEST(StaticInit, GlobalConstructorCouldAllocateBeforeMain) {
  const EarlyAllocations& e = early_allocations();
  ASSERT_TRUE(e.constructed);
  ASSERT_NE(e.block, nullptr) << "malloc from a static constructor failed";
  EXPECT_TRUE(check_pattern(e.block, e.block_size, kEarlyBlockId)) << "early block damaged";
  EXPECT_GE(e.usable_size, e.block_size);
  EXPECT_EQ(malloc_usable_size(e.block), e.usable_size);
  EXPECT_TRUE(e.calloc_was_zero);
  EXPECT_TRUE(e.realloc_kept_content);
  EXPECT_TRUE(e.aligned_alloc_aligned);
  ASSERT_NE(e.text, nullptr);
  EXPECT_EQ(*e.text, std::string(500, 'e'));
  // Freed from main: objects allocated before main are ordinary objects.
  void* grown = realloc(e.block, 5000);
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(check_pattern(grown, e.block_size, kEarlyBlockId));
  free(grown);
  delete e.text;
}

TEST(ThreadExit, ThreadLocalDestructorCanAllocateAndFree) {
  std::atomic<int> runs{0};
  g_failures = 0;
  auto body = [&runs] {
    ThreadExitAllocator& t = t_exit_allocator;
    t.early_size = 4000;
    t.early_id = g_next_id++;
    t.early = malloc(t.early_size);
    fill_pattern(t.early, t.early_size, t.early_id);
    t.destructor_runs = &runs;
    if (!churn(200, 5)) g_failures++;
  };
  // One at a time, then several at once.
  for (int i = 0; i < 4; i++) std::thread(body).join();
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; i++) threads.emplace_back(body);
  for (auto& t : threads) t.join();
  EXPECT_EQ(runs.load(), 12);
  EXPECT_EQ(g_failures.load(), 0);
  EXPECT_EQ(free_handoffs(), 0) << "objects allocated in thread_local destructors were damaged";
  EXPECT_TRUE(churn(1000, 6));
}

namespace {

pthread_key_t g_key;
std::atomic<int> g_key_destructor_calls{0};

struct KeyValue {
  int round;
  char payload[200];
};

// Runs at thread exit.  Twice it stores a fresh value, so glibc calls it
// again (up to PTHREAD_DESTRUCTOR_ITERATIONS rounds); the third time it only
// frees.
void key_destructor(void* v) {
  g_key_destructor_calls++;
  auto* kv = static_cast<KeyValue*>(v);
  for (char c : kv->payload)
    if (c != static_cast<char>('k' + kv->round)) {
      g_failures++;
      break;
    }
  int round = kv->round;
  free(kv);
  if (!churn(30, 1000 + static_cast<uint64_t>(round))) g_failures++;
  allocate_and_hand_off(40);
  if (round < 2) {
    auto* next = static_cast<KeyValue*>(malloc(sizeof(KeyValue)));
    next->round = round + 1;
    memset(next->payload, 'k' + next->round, sizeof(next->payload));
    pthread_setspecific(g_key, next);
  }
}

}  // namespace

TEST(ThreadExit, PthreadKeyDestructorCanAllocateAndFree) {
  ASSERT_EQ(pthread_key_create(&g_key, key_destructor), 0);
  g_failures = 0;
  g_key_destructor_calls = 0;
  auto body = [] {
    auto* kv = static_cast<KeyValue*>(malloc(sizeof(KeyValue)));
    kv->round = 0;
    memset(kv->payload, 'k', sizeof(kv->payload));
    pthread_setspecific(g_key, kv);
    if (!churn(100, 9)) g_failures++;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; i++) threads.emplace_back(body);
  for (auto& t : threads) t.join();
  pthread_key_delete(g_key);
  EXPECT_EQ(g_key_destructor_calls.load(), 18);
  EXPECT_EQ(g_failures.load(), 0);
  EXPECT_EQ(free_handoffs(), 0);
}

TEST(ThreadExit, ObjectsOfExitedThreadsCanBeFreedAndReallocatedElsewhere) {
  // Each thread allocates objects of many sizes and exits; the main thread
  // checks them, reallocates some and frees all of them.
  g_failures = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++) {
    threads.emplace_back([t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      for (int i = 0; i < 1500; i++) {
        size_t n = i % 100 == 0 ? 300000 + rng() % 2000000 : 1 + rng() % 3000;
        allocate_and_hand_off(n);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Handoff> taken;
  {
    std::lock_guard<std::mutex> lock(g_handoff_mutex);
    taken.swap(g_handoffs);
  }
  ASSERT_EQ(taken.size(), 8u * 1500u);
  int damaged = 0;
  for (size_t i = 0; i < taken.size(); i++) {
    Handoff& h = taken[i];
    if (!check_pattern(h.p, h.size, h.id)) damaged++;
    if (i % 3 == 0) {  // realloc an object whose owner is gone
      size_t n = h.size * 2 + 10;
      void* q = realloc(h.p, n);
      ASSERT_NE(q, nullptr);
      if (!check_pattern(q, h.size, h.id)) damaged++;
      h.p = q;
    }
    free(h.p);
  }
  EXPECT_EQ(damaged, 0);
  EXPECT_EQ(g_failures.load(), 0);
  // New threads (which may inherit the exited threads' allocators) work.
  threads.clear();
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&bad, t] {
      if (!churn(3000, 50 + static_cast<uint64_t>(t))) bad++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(ThreadExit, ThreadsCanFreeObjectsOfTheMainThread) {
  std::vector<Handoff> objs;
  for (int i = 0; i < 4000; i++) {
    size_t n = 1 + static_cast<size_t>(i * 37 % 5000);
    void* p = malloc(n);
    fill_pattern(p, n, static_cast<uint64_t>(i));
    objs.push_back({p, n, static_cast<uint64_t>(i)});
  }
  std::atomic<int> damaged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < objs.size(); i += 4) {
        if (!check_pattern(objs[i].p, objs[i].size, objs[i].id)) damaged++;
        free(objs[i].p);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(damaged.load(), 0);
  // The frees travel home to the main thread's allocator: it must still
  // hand out sound memory.
  EXPECT_TRUE(churn(5000, 77));
}

TEST(ThreadExit, MallocWorksAfterManyThreadsHaveExited) {
  g_failures = 0;
  struct roost_stats before = stats_snapshot();
  const int kWaves = 32, kPerWave = 8;
  for (int w = 0; w < kWaves; w++) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kPerWave; t++)
      threads.emplace_back([w, t] {
        if (!churn(200, static_cast<uint64_t>(w * 100 + t))) g_failures++;
        for (int i = 0; i < 10; i++) allocate_and_hand_off(static_cast<size_t>(16 + 100 * i));
      });
    for (auto& t : threads) t.join();
    if (w % 8 == 7) {
      EXPECT_EQ(free_handoffs(), 0);
    }
  }
  EXPECT_EQ(free_handoffs(), 0);
  EXPECT_EQ(g_failures.load(), 0);
  bool ok = false;
  std::thread([&ok] { ok = churn(2000, 4242); }).join();
  EXPECT_TRUE(ok) << "malloc in a new thread after 256 threads exited";
  EXPECT_TRUE(churn(2000, 4343));
  if (roost_active()) {
    // Allocators of exited threads are reused: at most kPerWave (+ slack)
    // live at once, never one per thread.
    struct roost_stats after = stats_snapshot();
    EXPECT_LE(after.allocators - before.allocators, 2u * kPerWave)
        << "per-thread allocators are not reused after threads exit";
  }
}

TEST(Fork, ChildCanAllocateWhileOtherThreadsWereAllocating) {
  // Other threads hold allocator locks at arbitrary moments; the child of a
  // fork must still be able to allocate (no inherited lock held forever).
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++)
    threads.emplace_back([&stop, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      std::vector<void*> v;
      while (!stop.load(std::memory_order_relaxed)) {
        size_t n = rng() % 8 == 0 ? 300000 : 1 + rng() % 2000;
        v.push_back(malloc(n));
        if (v.size() > 200) {
          for (void* p : v) free(p);
          v.clear();
        }
      }
      for (void* p : v) free(p);
    });
  int failures = 0;
  std::string first_failure;
  for (int i = 0; i < 25; i++) {
    ChildResult r = run_in_child(
        [] {
          child_check(churn(500, 11), "churn in the child");
          std::thread th([] { child_check(churn(200, 12), "churn in a thread of the child"); });
          th.join();
          auto* s = new std::string(5000, 'c');
          delete s;
        },
        20);
    if (!(r.exited && r.exit_code == 0)) {
      if (failures++ == 0) first_failure = r.describe();
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0) << "first failing child: " << first_failure;
  EXPECT_TRUE(churn(1000, 13)) << "parent after forks";
}
