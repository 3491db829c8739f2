// platform/unwind.h: the cached walk gives the same return addresses as
// libgcc's unwinder (glibc's backtrace), through ordinary frames, frames
// with a frame pointer and a variable-length array, libc's own frames
// (qsort's callback), a thread's first frame, threads walking at once, and
// a stack deeper than asked.
#include "platform/unwind.h"

#include <execinfo.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "platform/stack_trace.h"

namespace {

using roost::unwind::capture;

// The sanitizers intercept backtrace(): libgcc's walk then starts in the
// interceptor's frame, one more than the fast walk sees.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kInterceptorFrames = 1;
#else
constexpr int kInterceptorFrames = 0;
#endif

// The fast walk is built for x86-64 only; elsewhere (AArch64) capture()
// gives up at once and the profiler takes libgcc's walk, so there is
// nothing of its own to compare.
#define REQUIRE_FAST_WALK()                                                           \
  do {                                                                                \
    if (!roost::unwind::available()) GTEST_SKIP() << "no fast walk on this platform"; \
  } while (0)

struct Walks {
  std::vector<uintptr_t> fast, slow;
};

// Both walks from the same frame: their first entries (the return address
// into this function, from two calls) differ; the rest must not.
__attribute__((noinline)) Walks walk_both(size_t max = 128) {
  Walks w;
  std::vector<uintptr_t> fast(max);
  long n = capture(fast.data(), max);
  std::vector<void*> slow(max + kInterceptorFrames);
  int m = backtrace(slow.data(), static_cast<int>(slow.size()));
  if (n > 0) w.fast.assign(fast.begin() + 1, fast.begin() + n);
  for (int i = 1 + kInterceptorFrames; i < m; i++)
    w.slow.push_back(reinterpret_cast<uintptr_t>(slow[i]));
  asm volatile("" ::: "memory");  // (no jump to the caller: this frame stays)
  return w;
}

void expect_same(const Walks& w) {
  ASSERT_FALSE(w.fast.empty());
  EXPECT_EQ(w.fast, w.slow);
}

__attribute__((noinline)) Walks level3() {
  Walks w = walk_both();
  asm volatile("" ::: "memory");
  return w;
}
__attribute__((noinline, optimize("no-omit-frame-pointer"))) Walks level2(int n) {
  volatile char vla[n];  // a frame whose size only rbp knows
  vla[0] = 1;
  Walks w = level3();
  asm volatile("" ::: "memory");
  return w;
}
__attribute__((noinline)) Walks level1(int n) {
  Walks w = level2(n);
  asm volatile("" ::: "memory");
  return w;
}

#if defined(__x86_64__)
TEST(Unwind, IsBuiltOnX86_64) {
  EXPECT_TRUE(roost::unwind::available()) << "the fast walk is built on x86-64 with glibc 2.35";
}
#endif

TEST(Unwind, SameAsLibgccThroughOrdinaryAndFramePointerFrames) {
  REQUIRE_FAST_WALK();
  for (int i = 0; i < 3; i++) expect_same(level1(100 + i * 1000));  // cached the second time
}

Walks g_from_qsort;
int compare(const void* a, const void* b) {
  if (g_from_qsort.fast.empty()) g_from_qsort = walk_both();
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

TEST(Unwind, SameAsLibgccThroughLibc) {
  REQUIRE_FAST_WALK();
  int v[] = {3, 1, 2};
  qsort(v, 3, sizeof(int), compare);
  expect_same(g_from_qsort);
}

TEST(Unwind, SameAsLibgccInAThreadToItsFirstFrame) {
  REQUIRE_FAST_WALK();
  Walks w;
  std::thread([&] { w = level1(10); }).join();
  expect_same(w);
}

// Threads (more than the cores) walking the same frames at once, while
// they fill the cache and read it: every walk agrees with libgcc's.
TEST(Unwind, SameAsLibgccInThreadsWalkingAtOnce) {
  REQUIRE_FAST_WALK();
  constexpr int kThreads = 6, kWalks = 2000;
  std::vector<std::thread> threads;
  std::vector<int> mismatches(kThreads);
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&mismatches, t] {
      for (int i = 0; i < kWalks; i++) {
        Walks w = level1(10 + i);
        if (w.fast.empty() || w.fast != w.slow) mismatches[t]++;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; t++) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

__attribute__((noinline)) Walks recurse(int depth, size_t max) {
  if (depth == 0) return walk_both(max);
  Walks w = recurse(depth - 1, max);
  asm volatile("" ::: "memory");
  return w;
}

TEST(Unwind, StopsAtTheDepthAskedFor) {
  REQUIRE_FAST_WALK();
  Walks w = recurse(100, 40);
  EXPECT_EQ(w.fast.size(), 39u);
  EXPECT_EQ(w.fast, w.slow);
}

// stack_trace::capture takes the fast walk: what backtrace() returns from
// the same frame, after stack_trace::capture's own.
TEST(Unwind, StackTraceCaptureAgrees) {
  uintptr_t pcs[64];
  size_t n = roost::stack_trace::capture(pcs, 64);
  void* slow[64];
  int m = backtrace(slow, 64);
  ASSERT_GT(m, 2);
  ASSERT_EQ(n, static_cast<size_t>(m - kInterceptorFrames) + 1);
  for (int i = 1 + kInterceptorFrames; i < m; i++)
    EXPECT_EQ(pcs[i + 1 - kInterceptorFrames], reinterpret_cast<uintptr_t>(slow[i])) << i;
}

}  // namespace
