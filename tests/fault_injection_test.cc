// Out of memory is an answer: with the platform layer's fault injection
// (roost built with -DROOST_FAULT_INJECTION=1), the OS refuses mmap,
// madvise or munmap at chosen points, and every call that needed the
// memory returns NULL with errno ENOMEM (operator new: the new handler,
// then std::bad_alloc; nothrow: nullptr), every call that succeeded holds
// its data, and allocation works again once the OS gives memory again.
// Built against roost::prefixed_faults (the roost_* API, every tree, under
// the sanitizers too: ROOST_TEST_PREFIXED) and roost::static_faults (malloc
// and operator new, plain trees), and roost::prefixed_hardened_faults (the
// hardened build, plain trees: ROOST_TEST_HARDENED, where mprotect guards
// large objects).
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "roost.h"
#include "support.h"

extern "C" void roost_test_inject_faults(int kind, long first, long count);
extern "C" long roost_test_injected_faults(int kind);

namespace {

#if defined(ROOST_TEST_PREFIXED)
void* t_malloc(size_t n) { return roost_malloc(n); }
void t_free(void* p) { roost_free(p); }
void* t_calloc(size_t c, size_t n) { return roost_calloc(c, n); }
void* t_realloc(void* p, size_t n) { return roost_realloc(p, n); }
void* t_aligned_alloc(size_t a, size_t n) { return roost_aligned_alloc(a, n); }
void t_trim() { roost_trim(); }
#else
void* t_malloc(size_t n) { return malloc(n); }
void t_free(void* p) { free(p); }
void* t_calloc(size_t c, size_t n) { return calloc(c, n); }
void* t_realloc(void* p, size_t n) { return realloc(p, n); }
void* t_aligned_alloc(size_t a, size_t n) { return aligned_alloc(a, n); }
void t_trim() { malloc_trim(0); }
#endif

constexpr int kMap = 0, kPurge = 1, kUnmap = 2, kProtect = 3, kPopulate = 4, kMove = 5;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kHuge = (size_t{3} << 29);  // 1.5 GiB: mapped alone, always fresh

// The OS refuses calls [first, first + count) of `kind` (count < 0: all
// from `first` on) while this lives.
class Refusal {
 public:
  Refusal(int kind, long first, long count) : kind_(kind) {
    roost_test_inject_faults(kind, first, count);
  }
  ~Refusal() { roost_test_inject_faults(kind_, 0, 0); }
  Refusal(const Refusal&) = delete;
  Refusal& operator=(const Refusal&) = delete;

 private:
  int kind_;
};

// A block whose contents are a function of (id, offset): the first and last
// 4 KiB and one word per 64 KiB are written and checked, so gigabyte blocks
// stay cheap.
struct Block {
  unsigned char* p = nullptr;
  size_t size = 0;
  uint64_t id = 0;
};

unsigned char byte_at(uint64_t id, size_t i) {
  return static_cast<unsigned char>((id * 0x9E3779B97F4A7C15ull + i * 131) >> 24);
}

template <typename Fn>
void for_checked_offsets(size_t size, Fn fn) {
  for (size_t i = 0; i < size && i < 4096; i++) fn(i);
  for (size_t i = 4096; i + 4096 < size; i += 65536) fn(i);
  for (size_t i = size > 4096 ? size - 4096 : 4096; i < size; i++) fn(i);
}

void fill(const Block& b) {
  for_checked_offsets(b.size, [&](size_t i) { b.p[i] = byte_at(b.id, i); });
}

// Are the bytes fill() wrote for a block of `filled` bytes intact in `b`,
// as far as `b` reaches (a block moved by realloc may be shorter)?
bool intact(const Block& b, size_t filled) {
  bool ok = true;
  for_checked_offsets(filled, [&](size_t i) { ok &= i >= b.size || b.p[i] == byte_at(b.id, i); });
  return ok;
}

// Keeps the compiler from eliding an allocation whose result is unused.
[[maybe_unused]] void escape(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

bool all_zero(const void* p, size_t size) {
  bool ok = true;
  for_checked_offsets(size, [&](size_t i) { ok &= static_cast<const unsigned char*>(p)[i] == 0; });
  return ok;
}

}  // namespace

// The OS refuses every mmap: requests that need fresh memory fail cleanly,
// whatever the entry point, while memory roost already holds still serves;
// then the OS gives memory again and everything works, old blocks intact.
TEST(FaultInjection, RefusedMapsAreNullAndEnomemAndAllocationRecovers) {
  std::vector<Block> held;
  uint64_t next_id = 1;
  // Something roost already holds, before the refusal.
  for (size_t n : {size_t{48}, size_t{5000}, size_t{300000}, 3 * kMiB}) {
    Block b{static_cast<unsigned char*>(t_malloc(n)), n, next_id++};
    ASSERT_NE(b.p, nullptr);
    fill(b);
    held.push_back(b);
  }
  {
    Refusal refusal(kMap, 0, -1);
    errno = 0;
    EXPECT_EQ(t_malloc(kHuge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT_EQ(t_calloc(1, kHuge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT_EQ(t_aligned_alloc(size_t{1} << 30, kHuge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    // realloc to a size that needs fresh memory: NULL, the block untouched.
    errno = 0;
    EXPECT_EQ(t_realloc(held[1].p, kHuge), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_TRUE(intact(held[1], held[1].size));
    // Large blocks until roost's regions are used up: then NULL + ENOMEM.
    bool refused = false;
    for (int i = 0; i < 1024 && !refused; i++) {
      Block b{static_cast<unsigned char*>(t_malloc(64 * kMiB)), 64 * kMiB, next_id++};
      if (b.p == nullptr) {
        EXPECT_EQ(errno, ENOMEM);
        refused = true;
      } else {
        fill(b);
        held.push_back(b);
      }
    }
    EXPECT_TRUE(refused) << "64 GiB served without a single mmap";
    // Small objects still come from memory roost holds, or fail cleanly.
    for (int i = 0; i < 1000; i++) {
      errno = 0;
      void* p = t_malloc(64);
      if (p == nullptr) {
        EXPECT_EQ(errno, ENOMEM);
        break;
      }
      t_free(p);
    }
    EXPECT_GT(roost_test_injected_faults(kMap), 0);
  }
  // The OS gives memory again.
  void* big = t_malloc(kHuge);
  ASSERT_NE(big, nullptr);
  static_cast<volatile char*>(big)[kHuge - 1] = 1;
  t_free(big);
  for (const Block& b : held) {
    EXPECT_TRUE(intact(b, b.size)) << "block " << b.id << " damaged";
    t_free(b.p);
  }
  void* p = t_malloc(64 * kMiB);
  EXPECT_NE(p, nullptr);
  t_free(p);
}

// The OS refuses one mmap at a time, the Nth from now, for several N: roost
// asks again (a smaller region) or fails the one call cleanly.
TEST(FaultInjection, TheNthMapRefusedAtSeveralPoints) {
  std::vector<Block> held;
  uint64_t next_id = 100;
  for (long nth : {0L, 1L, 2L, 3L, 5L, 8L}) {
    Refusal refusal(kMap, nth, 1);
    for (int i = 0; i < 24; i++) {
      size_t n = i % 3 == 0 ? kHuge : (i % 3 == 1 ? 40 * kMiB : 700000);
      errno = 0;
      Block b{static_cast<unsigned char*>(t_malloc(n)), n, next_id++};
      if (b.p == nullptr) {
        EXPECT_EQ(errno, ENOMEM) << "size " << n;
        continue;
      }
      fill(b);
      held.push_back(b);
    }
    for (Block& b : held) {
      EXPECT_TRUE(intact(b, b.size)) << "block " << b.id << " damaged";
      t_free(b.p);
    }
    held.clear();
  }
}

// A purge the OS refuses leaves the bytes where they were: memory handed
// out again must not be taken for zeroed (calloc), and purging goes on
// once the OS accepts.  (ROOST_PURGE_DELAY=0 in the test's environment:
// released memory is purged at the next backend call.)
TEST(FaultInjection, ARefusedPurgeIsNotTakenForZeroedMemory) {
  const size_t n = 2 * kMiB;
  {
    Refusal refusal(kPurge, 0, -1);
    for (int round = 0; round < 20; round++) {
      void* p = t_malloc(n);
      ASSERT_NE(p, nullptr);
      memset(p, 0xAB, n);
      t_free(p);
      void* q = t_calloc(1, n);
      ASSERT_NE(q, nullptr);
      ASSERT_TRUE(all_zero(q, n)) << "calloc returned old bytes after a refused purge";
      memset(q, 0xCD, n);
      t_free(q);
    }
    EXPECT_GT(roost_test_injected_faults(kPurge), 0) << "no purge was attempted";
  }
  void* q = t_calloc(1, n);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(all_zero(q, n));
  t_free(q);
}

// MADV_POPULATE_WRITE refused (as by a kernel older than 5.14): calloc's
// large objects from fresh memory fault in as they are touched, and read
// as zero.  (ROOST_PURGE_DELAY=0: each freed object's memory is purged
// before the next calloc, so every calloc below has fresh pages.)
TEST(FaultInjection, ARefusedPopulateLeavesCallocZeroed) {
  {
    Refusal refusal(kPopulate, 0, -1);
    for (size_t n : {300 * size_t{1024}, 2 * kMiB, 9 * kMiB + 4321}) {
      for (int round = 0; round < 3; round++) {
        void* p = t_calloc(1, n);
        ASSERT_NE(p, nullptr) << "calloc(1, " << n << ")";
        ASSERT_TRUE(all_zero(p, n)) << "calloc(1, " << n << ") round " << round;
        memset(p, 0x5A, n);
        t_free(p);
      }
    }
    EXPECT_GT(roost_test_injected_faults(kPopulate), 0) << "no populate was attempted";
  }
  void* q = t_calloc(1, 2 * kMiB);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(all_zero(q, 2 * kMiB));
  t_free(q);
}

// The pages of released large objects moved into a bigger one
// (ROOST_MOVE_PAGES), refused as a kernel refuses a move after it has
// unmapped the destination: roost maps the range again, and the object
// reads as zero (calloc) and keeps what is written into it.  Where that
// mmap is refused too, the chunk is lost to roost and the object comes from
// elsewhere, or is NULL with ENOMEM.  Either way the released objects' pages
// stay theirs and a later move works.  Needs released memory kept resident
// (its own test, under a long ROOST_PURGE_DELAY).
TEST(FaultInjection, ARefusedMoveOfReleasedPagesLeavesTheObjectZeroed) {
  const char* delay = getenv("ROOST_PURGE_DELAY");
  if (delay == nullptr || strcmp(delay, "0") == 0)
    GTEST_SKIP() << "released memory is purged at once (ROOST_PURGE_DELAY)";
  if (!roost_test::kernel_moves_pages())
    GTEST_SKIP() << "this kernel does not move pages (MREMAP_DONTUNMAP)";
  // Two released large objects written whole (4 MiB chunks), nothing dirty
  // as big as the 12 MiB object asked for next (a 16 MiB chunk).
  // (A 64 MiB object made and freed first leaves room in the regions, so
  // that no new region is needed while mmap is refused.)
  auto release_written = [] {
    t_free(t_malloc(64 * kMiB));
    t_trim();
    void* a = t_malloc(3 * kMiB);
    void* b = t_malloc(3 * kMiB);
    ASSERT_TRUE(a != nullptr && b != nullptr);
    memset(a, 0x5A, 3 * kMiB);
    memset(b, 0xA5, 3 * kMiB);
    t_free(a);
    t_free(b);
  };
  for (bool lose : {false, true}) {
    release_written();
    {
      Refusal moves(kMove, 0, -1);
      Refusal maps(kMap, 0, lose ? -1 : 0);
      errno = 0;
      void* p = t_calloc(1, 12 * kMiB);
      if (p == nullptr) {
        EXPECT_TRUE(lose) << "NULL though the OS gave memory";
        EXPECT_EQ(errno, ENOMEM);
      } else {
        EXPECT_TRUE(all_zero(p, 12 * kMiB)) << (lose ? "lost" : "refused");
        memset(p, 0x3C, 12 * kMiB);
        EXPECT_EQ(static_cast<unsigned char*>(p)[12 * kMiB - 1], 0x3C);
        t_free(p);
      }
      EXPECT_GT(roost_test_injected_faults(kMove), 0) << "no move was tried";
    }
  }
  // The OS moves pages again: the released objects' pages fill the next
  // one, which calloc still hands out zeroed.
  release_written();
  unsigned char* p = static_cast<unsigned char*>(t_calloc(1, 12 * kMiB));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(all_zero(p, 12 * kMiB));
  t_free(p);
}

// realloc moves a big object's pages to its new place (ROOST_MOVE_PAGES);
// refused as a kernel refuses it after unmapping the destination, the
// object is copied instead, every byte kept.  Where the range cannot be
// mapped again either, the new object is lost to roost and another takes
// its place (or realloc fails with ENOMEM, the old object intact).
TEST(FaultInjection, ARefusedMoveOfAReallocatedObjectCopiesItInstead) {
  if (!roost_test::kernel_moves_pages())
    GTEST_SKIP() << "this kernel does not move pages (MREMAP_DONTUNMAP)";
  uint64_t id = 900;
  for (bool lose : {false, true}) {
    // Room in the regions for two objects of the new size (no new region
    // is needed while mmap is refused).
    t_free(t_malloc(64 * kMiB));
    Block b{static_cast<unsigned char*>(t_malloc(6 * kMiB + 123)), 6 * kMiB + 123, ++id};
    ASSERT_NE(b.p, nullptr);
    fill(b);
    long before = roost_test_injected_faults(kMove);
    {
      Refusal moves(kMove, 0, -1);
      Refusal maps(kMap, 0, lose ? -1 : 0);
      errno = 0;
      void* q = t_realloc(b.p, 20 * kMiB);
      if (q == nullptr) {
        EXPECT_TRUE(lose) << "NULL though the OS gave memory";
        EXPECT_EQ(errno, ENOMEM);
      } else {
        b.p = static_cast<unsigned char*>(q);
        memset(b.p + b.size, 0x3C, 20 * kMiB - b.size);
      }
      EXPECT_TRUE(intact(b, b.size)) << (lose ? "lost" : "refused");
      EXPECT_GT(roost_test_injected_faults(kMove), before) << "no move was tried";
    }
    t_free(b.p);
  }
}

// munmap refused: a huge object's free keeps its range (lost, not reused),
// and a shrinking realloc moves the object instead of cutting it in place.
TEST(FaultInjection, ARefusedUnmapLosesNothingButTheRange) {
  Block b{static_cast<unsigned char*>(t_malloc(kHuge)), kHuge, 7};
  ASSERT_NE(b.p, nullptr);
  fill(b);
  {
    Refusal refusal(kUnmap, 0, -1);
    Block small{static_cast<unsigned char*>(t_realloc(b.p, kHuge - 64 * kMiB)), kHuge - 64 * kMiB,
                7};
    ASSERT_NE(small.p, nullptr);
    EXPECT_TRUE(intact(small, b.size));
    t_free(small.p);
    void* again = t_malloc(kHuge);
    ASSERT_NE(again, nullptr);
    static_cast<volatile char*>(again)[kHuge - 1] = 1;
    t_free(again);
    EXPECT_GT(roost_test_injected_faults(kUnmap), 0);
  }
  void* after = t_malloc(kHuge);
  EXPECT_NE(after, nullptr);
  t_free(after);
}

#if defined(ROOST_TEST_HARDENED)
// The hardened build's guard pages after large objects (mprotect): refused,
// the object is handed out without one and works, grown and freed; a guard
// the OS will not lift at free loses that chunk only; a zero-size
// allocation whose range cannot be made inaccessible is a small object.
// (Run without ROOST_PURGE_DELAY=0: freed chunks are reused at once.)
TEST(FaultInjection, RefusedGuardPagesLeaveLargeObjectsWorking) {
  Block guarded{static_cast<unsigned char*>(t_malloc(3 * kMiB)), 3 * kMiB, 11};
  ASSERT_NE(guarded.p, nullptr);
  fill(guarded);
  {
    Refusal refusal(kProtect, 0, -1);
    Block b{static_cast<unsigned char*>(t_malloc(kMiB + 100)), kMiB + 100, 12};
    ASSERT_NE(b.p, nullptr);
    fill(b);
    Block grown{static_cast<unsigned char*>(t_realloc(b.p, 2 * kMiB + 100)), 2 * kMiB + 100, 12};
    ASSERT_NE(grown.p, nullptr);
    EXPECT_TRUE(intact(grown, b.size));
    fill(grown);
    EXPECT_TRUE(intact(guarded, guarded.size));
    t_free(guarded.p);  // its guard stays: the chunk is lost
    t_free(grown.p);
    void* z = t_malloc(0);
    ASSERT_NE(z, nullptr);
    t_free(z);
    EXPECT_GT(roost_test_injected_faults(kProtect), 0);
  }
  // Every byte of the chunks handed out next is writable (with the default
  // purge delay the two freed ones are reused first, unless lost).
  std::vector<void*> next;
  for (int i = 0; i < 4; i++) {
    next.push_back(t_malloc(4 * kMiB - 8192));
    ASSERT_NE(next.back(), nullptr);
    memset(next.back(), 5, 4 * kMiB - 8192);
  }
  for (void* p : next) t_free(p);
}
#endif

// Threads allocate, fill, resize and free while the OS refuses mmap, the
// Nth mmap, madvise and munmap in turn: every failure is ENOMEM, every
// success holds its bytes, and once the refusals stop nothing fails.
// One cycle through the plans, then 500 steps a thread (the run of
// `make test`); ROOSTTEST_FAULT_CYCLES and ROOSTTEST_FAULT_STEPS_AFTER ask
// for more (docs/TESTING.md).
TEST(FaultInjection, StressUnderRefusalsThenRecovery) {
  constexpr int kThreads = 3;
  auto env_count = [](const char* name, int fallback) {
    const char* e = getenv(name);
    return e != nullptr && atoi(e) > 0 ? atoi(e) : fallback;
  };
  const int cycles = env_count("ROOSTTEST_FAULT_CYCLES", 1);
  const int steps_after = env_count("ROOSTTEST_FAULT_STEPS_AFTER", 500);
#if defined(__SANITIZE_THREAD__)
  // Each huge mapping costs ThreadSanitizer its shadow: fewer of them.
  const int huge_one_in = 64;
#else
  const int huge_one_in = 16;
#endif
  std::atomic<bool> refusing{true};
  std::atomic<long> failures{0}, bad_errno{0}, damaged{0}, late_failures{0}, operations{0};
  auto worker = [&](int t) {
    std::mt19937_64 rng(1234 + t);
    std::vector<Block> live;
    uint64_t next_id = uint64_t(t) << 40;
    auto allocate = [&](bool after) {
      unsigned kind = rng() % 16;
      if (kind == 0 && rng() % (huge_one_in / 16) != 0) kind = 3;
      size_t n = kind == 0 ? kHuge : kind < 4 ? 300000 + rng() % (8 * kMiB) : 1 + rng() % 4000;
      errno = 0;
      Block b{nullptr, n, next_id++};
      if (kind == 1)
        b.p = static_cast<unsigned char*>(t_calloc(1, n));
      else if (kind == 2)
        b.p = static_cast<unsigned char*>(t_aligned_alloc(4096, n));
      else
        b.p = static_cast<unsigned char*>(t_malloc(n));
      operations++;
      if (b.p == nullptr) {
        if (errno != ENOMEM) bad_errno++;
        (after ? late_failures : failures)++;
        return;
      }
      if (kind == 1 && !all_zero(b.p, n)) damaged++;
      if (kind == 2 && reinterpret_cast<uintptr_t>(b.p) % 4096 != 0) damaged++;
      fill(b);
      live.push_back(b);
    };
    auto release = [&](size_t i) {
      if (!intact(live[i], live[i].size)) damaged++;
      t_free(live[i].p);
      live[i] = live.back();
      live.pop_back();
    };
    auto resize = [&](size_t i, bool after) {
      Block& b = live[i];
      size_t n = rng() % 2 ? b.size / 2 + 1 : b.size * 2;
      if (n > kHuge) n = kHuge;
      errno = 0;
      void* q = t_realloc(b.p, n);
      operations++;
      if (q == nullptr) {
        if (errno != ENOMEM) bad_errno++;
        (after ? late_failures : failures)++;
        if (!intact(b, b.size)) damaged++;  // the old block stays as it was
        return;
      }
      Block moved{static_cast<unsigned char*>(q), n, b.id};
      if (!intact(moved, b.size)) damaged++;
      b = moved;
      fill(b);
    };
    auto step = [&](bool after) {
      unsigned r = rng() % 8;
      if (live.size() < 64 && (r < 4 || live.empty()))
        allocate(after);
      else if (r < 6)
        release(rng() % live.size());
      else
        resize(rng() % live.size(), after);
      // Huge blocks do not stay: the process would hold gigabytes.
      for (size_t i = 0; i < live.size(); i++)
        if (live[i].size >= kHuge / 2) release(i);
    };
    while (refusing.load()) step(false);
    for (int i = 0; i < steps_after; i++) step(true);
    while (!live.empty()) release(live.size() - 1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) threads.emplace_back(worker, t);
  struct Plan {
    int kind;
    long first, count;
  };
  const Plan plans[] = {{kMap, 0, -1}, {kMap, 3, 1},   {kPurge, 0, -1}, {kUnmap, 0, -1},
                        {kMap, 1, 4},  {kMap, 10, -1}, {kPurge, 2, 5},  {kMap, 0, -1}};
  // Each plan holds for at least 60 ms and 150 of the workers' operations
  // (sanitizers slow them down), and a plan that refuses every mmap until an
  // allocation has failed under it; 20 s at most per plan.
  for (int cycle = 0; cycle < cycles; cycle++) {
    for (const Plan& plan : plans) {
      Refusal refusal(plan.kind, plan.first, plan.count);
      long ops = operations.load(), failed = failures.load();
      bool want_failure = plan.kind == kMap && plan.count < 0;
      auto start = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      while (std::chrono::steady_clock::now() - start < std::chrono::seconds(20) &&
             (operations.load() - ops < 150 || (want_failure && failures.load() == failed)))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  refusing = false;
  for (auto& th : threads) th.join();
  EXPECT_GT(failures.load(), 0) << "the refusals never reached an allocation";
  EXPECT_EQ(bad_errno.load(), 0) << "a failed call left errno other than ENOMEM";
  EXPECT_EQ(damaged.load(), 0) << "a block's bytes were damaged";
  EXPECT_EQ(late_failures.load(), 0) << "allocation failed after the refusals stopped";
  EXPECT_GT(operations.load(), 1000);
}

#if !defined(ROOST_TEST_PREFIXED)
namespace {
std::atomic<int> g_handler_calls{0};
void stop_refusing() {
  g_handler_calls++;
  roost_test_inject_faults(kMap, 0, 0);
}
}  // namespace

// operator new: the new handler runs when memory is refused (here it makes
// the OS give memory again, and new then succeeds); without a handler,
// std::bad_alloc, and nothrow new returns nullptr.
TEST(FaultInjection, OperatorNewThrowsOrReturnsNullOrCallsTheHandler) {
  {
    Refusal refusal(kMap, 0, -1);
    EXPECT_THROW(
        {
          char* p = new char[kHuge];
          escape(p);
          delete[] p;
        },
        std::bad_alloc);
    char* none = new (std::nothrow) char[kHuge];
    escape(none);
    EXPECT_EQ(none, nullptr);
    EXPECT_THROW(
        {
          auto* p = new (std::align_val_t{size_t{1} << 30}) char[kHuge];
          escape(p);
          operator delete[](p, std::align_val_t{size_t{1} << 30});
        },
        std::bad_alloc);
    std::new_handler old = std::set_new_handler(stop_refusing);
    char* p = new char[kHuge];
    escape(p);
    std::set_new_handler(old);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(g_handler_calls.load(), 1);
    p[kHuge - 1] = 1;
    delete[] p;
  }
}
#endif
