// The prefixed API of roost.h (roost_malloc, roost_free, roost_calloc,
// roost_realloc, roost_aligned_alloc, roost_usable_size, roost_stats,
// roost_print_stats): the malloc family's conformance checks as far as they
// apply, the shadow-model stress and cross-thread stress, and misuse
// diagnostics.  Linked to roost::prefixed, so it also runs under
// AddressSanitizer (ROOST_SANITIZE=address) beside the system allocator.
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "roost.h"
#include "shadow_heap.h"
#include "support.h"

using namespace roost_test;
using namespace std::chrono_literals;

namespace {

constexpr size_t kMiB = 1024 * 1024;

const HeapOps kPrefixed = {"roost_*",
                           [](size_t n) { return roost_malloc(n); },
                           [](size_t c, size_t n) { return roost_calloc(c, n); },
                           [](void* p, size_t n) { return roost_realloc(p, n); },
                           [](size_t a, size_t n) { return roost_aligned_alloc(a, n); },
                           [](void* p) { roost_free(p); },
                           [](void* p) { return roost_usable_size(p); }};

struct roost_stats snapshot() {
  struct roost_stats s {};
  EXPECT_EQ(roost_stats(&s), 0);
  return s;
}

std::vector<size_t> spread_of_sizes() {
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 256; n++) sizes.push_back(n);
  for (size_t n = 257; n < 8 * kMiB; n += n / 7 + 1) sizes.push_back(n);
  for (size_t p = 512; p <= 8 * kMiB; p *= 2) {
    sizes.push_back(p - 1);
    sizes.push_back(p);
    sizes.push_back(p + 1);
  }
  return sizes;
}

}  // namespace

TEST(Prefixed, ZeroSizeGivesUniqueFreeablePointers) {
  std::set<void*> seen;
  std::vector<void*> ptrs;
  for (int i = 0; i < 100; i++) {
    void* p = roost_malloc(opaque<size_t>(0));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(seen.insert(p).second) << "roost_malloc(0) returned " << p << " twice";
    ptrs.push_back(p);
  }
  for (void* p : ptrs) roost_free(p);
}

TEST(Prefixed, ResultsAreAlignedAndUsableSizeIsWritable) {
  struct Obj {
    void* p;
    size_t n, usable;
  };
  std::vector<Obj> objs;
  uint64_t id = 0;
  for (size_t n : spread_of_sizes()) {
    void* p = roost_malloc(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(is_aligned(p, 16)) << "roost_malloc(" << n << ") = " << p;
    size_t usable = roost_usable_size(p);
    EXPECT_GE(usable, n);
    fill_pattern(p, usable, id++);
    objs.push_back({p, n, usable});
    if (n > kMiB) {  // don't keep the big ones live
      EXPECT_TRUE(check_pattern(p, usable, id - 1));
      roost_free(p);
      objs.pop_back();
    }
  }
  for (size_t i = 0; i < objs.size(); i++) {
    EXPECT_EQ(roost_usable_size(objs[i].p), objs[i].usable);
    roost_free(objs[i].p);
  }
  EXPECT_EQ(roost_usable_size(nullptr), 0u);
  roost_free(nullptr);
}

TEST(Prefixed, UsableRegionsOfLiveObjectsDoNotOverlap) {
  std::vector<std::pair<void*, size_t>> objs;
  for (size_t n : spread_of_sizes()) {
    if (n > 512 * 1024) continue;
    void* p = roost_malloc(n);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, roost_usable_size(p), n);
    objs.push_back({p, n});
  }
  for (auto [p, n] : objs) {
    EXPECT_TRUE(check_pattern(p, roost_usable_size(p), n)) << "object of " << n << " overwritten";
    roost_free(p);
  }
}

TEST(Prefixed, HugeRequestsFailWithENOMEM) {
  for (size_t n : {SIZE_MAX, static_cast<size_t>(PTRDIFF_MAX) + 1, size_t{1} << 48}) {
    errno = 0;
    EXPECT_EQ(roost_malloc(opaque(n)), nullptr) << n;
    EXPECT_EQ(errno, ENOMEM) << n;
    errno = 0;
    EXPECT_EQ(roost_aligned_alloc(64, opaque(n)), nullptr) << n;
    EXPECT_EQ(errno, ENOMEM) << n;
  }
  errno = 0;
  EXPECT_EQ(roost_calloc(opaque(SIZE_MAX / 2), 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(roost_calloc(opaque(size_t{1} << 32), size_t{1} << 32), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Prefixed, CallocZeroesRecycledMemory) {
  for (size_t n : {size_t{1}, size_t{24}, size_t{100}, size_t{4096}, size_t{10000}, size_t{65536},
                   size_t{300000}, 2 * kMiB, 16 * kMiB}) {
    for (int round = 0; round < 6; round++) {
      void* dirty = roost_malloc(n);
      ASSERT_NE(dirty, nullptr);
      memset(dirty, 0xAA, roost_usable_size(dirty));
      roost_free(dirty);
      void* p = round % 2 ? roost_calloc(n, 1) : roost_calloc(1, n);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(find_nonzero(p, n), SIZE_MAX) << "roost_calloc(" << n << ") round " << round;
      memset(p, 0xAA, n);
      roost_free(p);
    }
  }
  void* z = roost_calloc(0, opaque(SIZE_MAX));
  EXPECT_NE(z, nullptr);
  roost_free(z);
}

TEST(Prefixed, CallocIsZeroAfterAHistoryOfLargeBlocks) {
  for (uint64_t seed : {1, 2, 3}) EXPECT_EQ(run_large_calloc_history(kPrefixed, seed, 400), "");
}

TEST(Prefixed, ReallocPreservesContentUpTo4MiBAndBack) {
  std::vector<size_t> sizes;
  for (size_t n = 1; n < 4 * kMiB; n += n / 9 + 1) sizes.push_back(n);
  sizes.push_back(4 * kMiB);
  std::vector<size_t> down(sizes.rbegin() + 1, sizes.rend());
  sizes.insert(sizes.end(), down.begin(), down.end());
  size_t cur = sizes[0];
  uint64_t id = 1;
  void* p = roost_malloc(cur);
  fill_pattern(p, cur, id);
  for (size_t i = 1; i < sizes.size(); i++) {
    void* q = roost_realloc(p, sizes[i]);
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(check_pattern(q, std::min(cur, sizes[i]), id)) << cur << " -> " << sizes[i];
    cur = sizes[i];
    fill_pattern(q, cur, ++id);
    p = q;
  }
  roost_free(p);
}

TEST(Prefixed, ReallocEdgeCases) {
  void* p = roost_realloc(nullptr, 100);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(roost_usable_size(p), 100u);
  size_t usable = roost_usable_size(p);
  EXPECT_EQ(roost_realloc(p, usable), p) << "realloc within the usable size moved";
  fill_pattern(p, usable, 3);
  errno = 0;
  EXPECT_EQ(roost_realloc(p, opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(check_pattern(p, usable, 3)) << "failed realloc damaged the block";
  struct roost_stats before = snapshot();
  EXPECT_EQ(roost_realloc(p, 0), nullptr) << "realloc(p, 0) frees and returns NULL";
  EXPECT_GE(snapshot().frees - before.frees, 1u);
}

TEST(Prefixed, AlignedAllocHonoursEveryPowerOfTwoUpTo1MiB) {
  uint64_t id = 0;
  for (size_t align = 1; align <= kMiB; align *= 2) {
    std::vector<std::pair<void*, size_t>> objs;
    for (size_t size :
         {size_t{0}, size_t{1}, align - 1, align, align + 1, 3 * align, size_t{100000}}) {
      void* p = roost_aligned_alloc(align, size);
      ASSERT_NE(p, nullptr) << align << " " << size;
      EXPECT_TRUE(is_aligned(p, align))
          << "roost_aligned_alloc(" << align << ", " << size << ") = " << p;
      size_t usable = roost_usable_size(p);
      EXPECT_GE(usable, size);
      fill_pattern(p, usable, id + objs.size());
      objs.push_back({p, usable});
    }
    for (size_t i = 0; i < objs.size(); i++) {
      EXPECT_TRUE(check_pattern(objs[i].first, objs[i].second, id + i));
      roost_free(objs[i].first);
    }
    id += objs.size();
  }
}

TEST(Prefixed, AlignedAllocRejectsNonPowerOfTwoWithEINVAL) {
  for (size_t align : {size_t{0}, size_t{3}, size_t{24}, size_t{48}, size_t{4097}, SIZE_MAX}) {
    errno = 0;
    EXPECT_EQ(roost_aligned_alloc(opaque(align), 64), nullptr) << align;
    EXPECT_EQ(errno, EINVAL) << align;
  }
}

TEST(Prefixed, StatsCountAllocationsFreesAndBytes) {
  EXPECT_EQ(roost_stats(nullptr), -1);
  struct roost_stats before = snapshot();
  std::vector<void*> v;
  for (int i = 0; i < 500; i++) v.push_back(roost_malloc(100));
  void* large = roost_malloc(4 * kMiB);
  struct roost_stats during = snapshot();
  EXPECT_GE(during.allocations - before.allocations, 501u);
  EXPECT_GE(during.large_allocations - before.large_allocations, 1u);
  EXPECT_GE(during.bytes_in_use, before.bytes_in_use + 500 * 100 + 4 * kMiB);
  EXPECT_GE(during.bytes_committed, during.bytes_in_use - before.bytes_in_use);
  EXPECT_GE(during.bytes_reserved, during.bytes_committed);
  EXPECT_GE(during.allocators, 1u);
  EXPECT_GE(during.slabs, 1u);
  EXPECT_GE(during.chunks, 1u);
  for (void* p : v) roost_free(p);
  roost_free(large);
  struct roost_stats after = snapshot();
  EXPECT_GE(after.frees - during.frees, 501u);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

TEST(Prefixed, PrintStatsWritesOneLinePerCounter) {
  ChildResult r = run_in_child([] {
    void* p = roost_malloc(10);
    roost_free(p);
    roost_print_stats();
  });
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(std::regex_search(r.err, std::regex("^roost: report of pid [0-9]+ ")))
      << r.describe();
  for (const char* name :
       {"allocations", "frees", "bytes_in_use", "bytes_committed", "bytes_reserved",
        "large_allocations", "slabs", "chunks", "allocators"}) {
    std::regex line(std::string("(^|\n)roost: ") + name + " +[0-9]+  [^\n]+\n");
    EXPECT_TRUE(std::regex_search(r.err, line)) << "no line for " << name << " in:\n" << r.err;
  }
}

TEST(Prefixed, RandomOperationsAgreeWithTheShadowModel) {
  for (uint64_t seed : stress_seeds()) {
    StressResult r = run_shadow_stress(kPrefixed, seed, 300000, 700ms);
    EXPECT_EQ(r.error, "") << "seed " << seed;
  }
}

TEST(Prefixed, ObjectsFreedAndReallocatedByOtherThreads) {
  EXPECT_EQ(run_cross_thread_stress(kPrefixed, 4, 3, 100000, 1500ms), "");
}

namespace {
void (*volatile g_roost_free)(void*) = roost_free;
size_t (*volatile g_roost_usable_size)(const void*) = roost_usable_size;
char g_array[1024] __attribute__((aligned(64)));

void expect_diagnostic(const std::function<void()>& misuse) {
  ChildResult r = run_in_child(misuse, 20);
  EXPECT_FALSE(r.exited) << "misuse not detected: " << r.describe();
  EXPECT_EQ(r.signal, SIGABRT) << r.describe();
  EXPECT_TRUE(std::regex_search(r.err, std::regex("(^|\n)roost: [^\n]*0x[0-9a-f]+")))
      << "no \"roost: <fault> 0x<address>\" line on stderr:\n"
      << r.err;
}
}  // namespace

TEST(PrefixedMisuse, FreeOfAPointerFromAnotherAllocatorAborts) {
  void* foreign = malloc(64);  // the system allocator's (or ASan's)
  expect_diagnostic([foreign] { g_roost_free(foreign); });
  free(foreign);
}

TEST(PrefixedMisuse, FreeOfAGlobalOrStackPointerAborts) {
  void* g = g_array + 64;
  expect_diagnostic([g] { g_roost_free(g); });
  alignas(16) char on_stack[64];
  void* s = on_stack;
  expect_diagnostic([s] { g_roost_free(s); });
}

TEST(PrefixedMisuse, FreeOfAnInteriorPointerAborts) {
  char* p = static_cast<char*>(roost_malloc(64));
  void* inner = p + 8;
  expect_diagnostic([inner] { g_roost_free(inner); });
  roost_free(p);
}

TEST(PrefixedMisuse, UsableSizeOfAForeignPointerAborts) {
  void* g = g_array + 128;
  expect_diagnostic([g] { (void)g_roost_usable_size(g); });
}
