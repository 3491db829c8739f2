// Conformance of the C/POSIX/glibc malloc family at its edges, as glibc
// behaves: malloc, calloc, realloc, reallocarray, free, aligned_alloc,
// posix_memalign, memalign, valloc, pvalloc, malloc_usable_size, free_sized,
// free_aligned_sized, malloc_trim.  Also checks that roost is the allocator
// serving the process when ROOSTTEST_EXPECT=1 says it must be.
//
// Built twice: linked to roost::roost (ROOST_TEST_LINKED) and unlinked, the
// latter run with LD_PRELOAD=libroost.so and also against plain glibc, where
// the tests of roost's own documented behaviour skip.
#include <gnu/libc-version.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "shadow_heap.h"
#include "support.h"

// The tests keep using a block after a realloc or reallocarray of it has
// failed (the block is then still valid); GCC cannot know the call failed.
#pragma GCC diagnostic ignored "-Wuse-after-free"

using namespace roost_test;

namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024, kGiB = 1024 * kMiB;

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// free_sized and free_aligned_sized (C23) are not declared by glibc 2.36.
using FreeSizedFn = void (*)(void*, size_t);
using FreeAlignedSizedFn = void (*)(void*, size_t, size_t);
#ifdef ROOST_TEST_LINKED
extern "C" void test_free_sized(void*, size_t) __asm__("free_sized");
extern "C" void test_free_aligned_sized(void*, size_t, size_t) __asm__("free_aligned_sized");
FreeSizedFn free_sized_fn() { return &test_free_sized; }
FreeAlignedSizedFn free_aligned_sized_fn() { return &test_free_aligned_sized; }
#else
FreeSizedFn free_sized_fn() {
  return reinterpret_cast<FreeSizedFn>(dlsym(RTLD_DEFAULT, "free_sized"));
}
FreeAlignedSizedFn free_aligned_sized_fn() {
  return reinterpret_cast<FreeAlignedSizedFn>(dlsym(RTLD_DEFAULT, "free_aligned_sized"));
}
#endif

// True when the running glibc is at least 2.<minor>.
bool glibc_at_least(int minor) {
  int major = 0, min = 0;
  sscanf(gnu_get_libc_version(), "%d.%d", &major, &min);
  return major > 2 || (major == 2 && min >= minor);
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

size_t next_pow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// A spread of sizes across every kind of object: tiny, every small class
// boundary region, medium, large.
std::vector<size_t> spread_of_sizes() {
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 256; n++) sizes.push_back(n);
  for (size_t n = 257; n < 8 * kMiB; n += n / 7 + 1) {
    sizes.push_back(n - 1);
    sizes.push_back(n);
  }
  for (size_t p = 512; p <= 8 * kMiB; p *= 2) {
    sizes.push_back(p - 1);
    sizes.push_back(p);
    sizes.push_back(p + 1);
  }
  return sizes;
}

}  // namespace

// ---------------------------------------------------------------------------
// Is roost serving this process?

TEST(RoostActive, ServesMallocWhenExpected) {
  if (!roost_active()) {
    if (roost_expected())
      FAIL() << "ROOSTTEST_EXPECT=1 but roost_stats is not found: roost is not serving "
                "this process (broken LD_PRELOAD or link?)";
    GTEST_SKIP() << "running on the system allocator";
  }
  struct roost_stats before = stats_snapshot();
  std::vector<void*> objects;
  for (int i = 0; i < 100; i++) {
    objects.push_back(malloc(opaque<size_t>(64)));
    escape(objects.back());
  }
  struct roost_stats during = stats_snapshot();
  EXPECT_GE(during.allocations - before.allocations, 100u);
  EXPECT_GE(during.bytes_in_use, before.bytes_in_use + 100 * 64);
  for (void* p : objects) free(p);
  struct roost_stats after = stats_snapshot();
  EXPECT_GE(after.frees - during.frees, 100u);
}

TEST(RoostActive, ServesAllocationsMadeInsideLibcAndLibstdcxx) {
  REQUIRE_ROOST();
  struct roost_stats before = stats_snapshot();
  // strdup allocates inside libc; freeing its result through roost's free
  // would be diagnosed as "not owned" if libc had used another allocator.
  char* s = strdup(opaque("a string duplicated by libc"));
  ASSERT_NE(s, nullptr);
  struct roost_stats after_strdup = stats_snapshot();
  EXPECT_GE(after_strdup.allocations - before.allocations, 1u);
  free(s);
  // std::string's buffer comes from libstdc++'s inline code or operator new.
  auto* str = new std::string(1000, 'x');
  escape(str);
  struct roost_stats after_string = stats_snapshot();
  EXPECT_GE(after_string.allocations - after_strdup.allocations, 2u);
  delete str;
}

// ---------------------------------------------------------------------------
// malloc, free, malloc_usable_size

TEST(Malloc, ZeroSizeGivesUniqueNonNullFreeablePointers) {
  std::vector<void*> ptrs;
  for (int i = 0; i < 100; i++) {
    void* p = malloc(opaque<size_t>(0));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(is_aligned(p, 16));
    ptrs.push_back(p);
  }
  std::vector<void*> sorted = ptrs;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "malloc(0) returned the same pointer twice";
  for (void* p : ptrs) free(p);
}

TEST(Malloc, EveryResultIs16ByteAligned) {
  std::vector<void*> live;
  for (size_t n = 0; n <= 2048; n++) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr) << "size " << n;
    EXPECT_TRUE(is_aligned(p, 16)) << "malloc(" << n << ") = " << p;
    live.push_back(p);
  }
  for (size_t n : spread_of_sizes()) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr) << "size " << n;
    EXPECT_TRUE(is_aligned(p, 16)) << "malloc(" << n << ") = " << p;
    free(p);
  }
  for (void* p : live) free(p);
}

TEST(Malloc, UsableSizeIsAtLeastTheRequestAndAllOfItIsWritable) {
  // All live at once, each filled to its usable size, then all checked:
  // an object that overlapped another, or a usable size that reached into a
  // neighbour, shows up as a damaged pattern.
  struct Obj {
    void* p;
    size_t n, usable;
  };
  std::vector<Obj> objs;
  uint64_t id = 0;
  for (size_t n : spread_of_sizes()) {
    if (n > 2 * kMiB) continue;  // keep the live set small
    void* p = malloc(n);
    ASSERT_NE(p, nullptr) << "size " << n;
    size_t usable = malloc_usable_size(p);
    EXPECT_GE(usable, n) << "malloc_usable_size(malloc(" << n << "))";
    fill_pattern(p, usable, id++);
    objs.push_back({p, n, usable});
  }
  id = 0;
  for (const Obj& o : objs) {
    EXPECT_EQ(find_pattern_mismatch(o.p, o.usable, id), SIZE_MAX)
        << "object of size " << o.n << " (usable " << o.usable << ") was overwritten";
    EXPECT_EQ(malloc_usable_size(o.p), o.usable) << "usable size changed";
    id++;
  }
  for (const Obj& o : objs) free(o.p);
}

TEST(Malloc, UsableSizeOfNullIsZero) { EXPECT_EQ(malloc_usable_size(nullptr), 0u); }

TEST(Malloc, FreeOfNullDoesNothing) {
  free(nullptr);
  void* p = malloc(10);
  EXPECT_NE(p, nullptr);
  free(p);
}

TEST(Malloc, HugeRequestsFailWithENOMEM) {
  const size_t huge[] = {SIZE_MAX,
                         SIZE_MAX - 4096,
                         static_cast<size_t>(PTRDIFF_MAX) + 1,
                         static_cast<size_t>(PTRDIFF_MAX),
                         size_t{1} << 62,
                         size_t{1} << 48};
  for (size_t n : huge) {
    errno = 0;
    void* p = malloc(opaque(n));
    EXPECT_EQ(p, nullptr) << "malloc(" << n << ")";
    EXPECT_EQ(errno, ENOMEM) << "malloc(" << n << ")";
    free(p);
  }
  void* p = malloc(100);  // still works afterwards
  EXPECT_NE(p, nullptr);
  free(p);
}

// ---------------------------------------------------------------------------
// calloc

TEST(Calloc, ZeroesMemoryThatWasDirtyBeforeReuse) {
  const size_t sizes[] = {1,     8,     16,     24,     100,      256,      1000,     4096,
                          10000, 65536, 200000, 300000, 1 * kMiB, 3 * kMiB, 8 * kMiB, 16 * kMiB};
  for (size_t n : sizes) {
    for (int round = 0; round < 8; round++) {
      void* dirty = malloc(n);
      ASSERT_NE(dirty, nullptr);
      memset(dirty, 0xAA, malloc_usable_size(dirty));
      escape(dirty);
      free(dirty);
      // Alternate the two argument orders.
      void* p = round % 2 == 0 ? calloc(1, n) : calloc(n, 1);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(find_nonzero(p, n), SIZE_MAX) << "calloc(" << n << ") round " << round;
      memset(p, 0xAA, n);
      escape(p);
      free(p);
    }
    if (n % 8 == 0) {
      void* p = calloc(n / 8, 8);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(find_nonzero(p, n), SIZE_MAX) << "calloc(" << n / 8 << ", 8)";
      free(p);
    }
  }
}

TEST(Calloc, ManySmallDirtyObjectsComeBackZeroed) {
  // Dirty a few thousand objects per size, free them, then calloc the same
  // number: every one of them, reused or not, is zero.
  for (size_t n : {16, 48, 80, 144, 512, 2000}) {
    std::vector<void*> v;
    for (int i = 0; i < 2000; i++) {
      v.push_back(malloc(n));
      memset(v.back(), 0xAA, n);
      escape(v.back());
    }
    for (void* p : v) free(p);
    v.clear();
    for (int i = 0; i < 2000; i++) {
      void* p = calloc(1, n);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(find_nonzero(p, n), SIZE_MAX) << "calloc(1, " << n << ") #" << i;
      v.push_back(p);
    }
    for (void* p : v) free(p);
  }
}

TEST(Calloc, OverflowingProductFailsWithENOMEM) {
  const size_t cases[][2] = {{SIZE_MAX / 2, 3},
                             {3, SIZE_MAX / 2},
                             {SIZE_MAX, SIZE_MAX},
                             {size_t{1} << 32, size_t{1} << 32},
                             {SIZE_MAX, 2}};
  for (const auto& c : cases) {
    errno = 0;
    void* p = calloc(opaque(c[0]), opaque(c[1]));
    EXPECT_EQ(p, nullptr) << "calloc(" << c[0] << ", " << c[1] << ")";
    EXPECT_EQ(errno, ENOMEM) << "calloc(" << c[0] << ", " << c[1] << ")";
  }
  errno = 0;
  void* p = calloc(opaque<size_t>(1), opaque(SIZE_MAX));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Calloc, ZeroCountOrSizeGivesAFreeablePointer) {
  void* a = calloc(opaque<size_t>(0), opaque(SIZE_MAX));
  void* b = calloc(opaque(SIZE_MAX), opaque<size_t>(0));
  void* c = calloc(0, 0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_NE(c, nullptr);
  free(a);
  free(b);
  free(c);
}

TEST(Calloc, LargeBlocksAreZeroIncludingAfterReuse) {
  for (size_t n : {24 * kMiB, 64 * kMiB}) {
    for (int round = 0; round < 2; round++) {
      unsigned char* p = static_cast<unsigned char*>(calloc(1, n));
      ASSERT_NE(p, nullptr) << "calloc(1, " << n << ")";
      ASSERT_EQ(find_nonzero(p, n), SIZE_MAX) << "calloc(1, " << n << ") round " << round;
      memset(p, 0xAA, n);
      escape(p);
      free(p);
    }
  }
}

TEST(Calloc, IsZeroAfterAHistoryOfLargeBlocks) {
  // Large blocks dirtied, freed, reallocated in random order: a calloc that
  // reuses any of that memory must zero all of it.
  for (uint64_t seed : {1, 2, 3}) EXPECT_EQ(run_large_calloc_history(kMallocFamily, seed, 400), "");
}

TEST(Calloc, OneGibibyteIsZeroWithoutBeingWrittenByTheAllocator) {
  // Memory fresh from the OS is already zero: calloc must not write it again,
  // or a 1 GiB calloc would cost 1 GiB of resident memory.
  long rss_before = status_kb("VmRSS");
  ASSERT_GT(rss_before, 0);
  unsigned char* p = static_cast<unsigned char*>(calloc(1024, kMiB));
  ASSERT_NE(p, nullptr) << "calloc(1024, 1 MiB) failed";
  std::mt19937_64 rng(42);
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[kGiB - 1], 0);
  for (int i = 0; i < 256; i++) {
    size_t at = rng() % kGiB;
    ASSERT_EQ(p[at], 0) << "offset " << at;
  }
  long rss_after = status_kb("VmRSS");
  EXPECT_LT(rss_after - rss_before, 64 * 1024)
      << "RSS grew by " << (rss_after - rss_before) << " kB for a 1 GiB calloc read at 258 places";
  free(p);
}

// Pages of [p, p + size) the kernel has mapped (mincore), or -1.
long mapped_pages(const void* p, size_t size) {
  const size_t page = page_size();
  uintptr_t from = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  size_t pages = (reinterpret_cast<uintptr_t>(p) + size - from + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  if (mincore(reinterpret_cast<void*>(from), pages * page, vec.data()) != 0) return -1;
  long n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

// Whether this kernel carries out MADV_POPULATE_WRITE (Linux 5.14 and
// later; an emulator such as qemu-user may accept the call and do nothing).
bool kernel_populates() {
  const size_t page = page_size();
  void* m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  bool ok = madvise(m, page, 23 /* MADV_POPULATE_WRITE */) == 0 && mapped_pages(m, page) == 1;
  munmap(m, page);
  return ok;
}

TEST(Calloc, FreshLargeBlocksUpToTheBoundAreMappedAtOnceBiggerOnesStayLazy) {
  if (!roost_active()) GTEST_SKIP() << "roost's documented behaviour (ROOST_CALLOC_POPULATE)";
  if (!kernel_populates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE";
  // After malloc_trim nothing released is waiting: the next large objects
  // come from memory that was never written or has been purged.
  for (size_t n : {300 * kKiB, 2 * kMiB + 12345, 16 * kMiB}) {
    malloc_trim(0);
    unsigned char* p = static_cast<unsigned char*>(calloc(1, n));
    ASSERT_NE(p, nullptr) << "calloc(1, " << n << ")";
    long pages = static_cast<long>((n + page_size() - 1) / page_size());
    EXPECT_EQ(mapped_pages(p, n), pages) << "calloc(1, " << n << "): its pages are not mapped";
    ASSERT_EQ(find_nonzero(p, n), SIZE_MAX) << "calloc(1, " << n << ")";
    free(p);
  }
  // Above 16 MiB: left to fault in as the program touches it (a sparse
  // table costs what it uses).
  malloc_trim(0);
  const size_t big = 40 * kMiB;
  unsigned char* q = static_cast<unsigned char*>(calloc(1, big));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(mapped_pages(q, big), 0) << "calloc(1, 40 MiB) mapped pages the program never touched";
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[big - 1], 0);
  free(q);
}

// ---------------------------------------------------------------------------
// realloc, reallocarray

TEST(Realloc, NullPointerBehavesAsMalloc) {
  struct roost_stats before = stats_snapshot();
  void* p = realloc(nullptr, opaque<size_t>(100));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(p, 16));
  EXPECT_GE(malloc_usable_size(p), 100u);
  memset(p, 1, 100);
  if (roost_active()) {
    EXPECT_GE(stats_snapshot().allocations - before.allocations, 1u);
  }
  free(p);
  void* z = realloc(nullptr, opaque<size_t>(0));
  EXPECT_NE(z, nullptr) << "realloc(NULL, 0) is malloc(0): a unique pointer";
  free(z);
}

TEST(Realloc, ZeroSizeFreesAndReturnsNull) {
  for (size_t n : {size_t{1}, size_t{100}, size_t{5000}, size_t{300000}, 2 * kMiB}) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    struct roost_stats before = stats_snapshot();
    void* r = realloc(p, opaque<size_t>(0));
    EXPECT_EQ(r, nullptr) << "realloc(p, 0) for a block of " << n;
    if (roost_active()) {
      struct roost_stats after = stats_snapshot();
      EXPECT_GE(after.frees - before.frees, 1u) << "realloc(p, 0) did not free p";
      EXPECT_LT(after.bytes_in_use, before.bytes_in_use);
    }
    free(r);
  }
}

TEST(Realloc, PreservesContentGrowingTo4MiBAndShrinkingBack) {
  // Walk the sizes up from 1 byte to 4 MiB and back down, through every size
  // class region, checking every byte at every step.
  std::vector<size_t> sizes;
  for (size_t n = 1; n < 4 * kMiB; n += n / 9 + 1) sizes.push_back(n);
  sizes.push_back(4 * kMiB);
  std::vector<size_t> down(sizes.rbegin() + 1, sizes.rend());
  sizes.insert(sizes.end(), down.begin(), down.end());

  uint64_t id = 7;
  size_t cur = sizes[0];
  void* p = malloc(cur);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, cur, id);
  for (size_t i = 1; i < sizes.size(); i++) {
    size_t next = sizes[i];
    void* q = realloc(p, next);
    ASSERT_NE(q, nullptr) << "realloc " << cur << " -> " << next;
    EXPECT_TRUE(is_aligned(q, 16));
    EXPECT_GE(malloc_usable_size(q), next);
    size_t kept = std::min(cur, next);
    ASSERT_EQ(find_pattern_mismatch(q, kept, id), SIZE_MAX)
        << "content lost in realloc " << cur << " -> " << next;
    // New pattern over the whole block for the next step.
    fill_pattern(q, next, ++id);
    p = q;
    cur = next;
  }
  free(p);
}

// A big buffer grown past its chunk, again and again (a file read into a
// growing buffer): every byte kept at every step.  Under roost the whole
// 2 MiB stretches of its pages move to the new place instead of being
// copied (ROOST_MOVE_PAGES, on unless the environment says 0, where the
// kernel can), which the statistics count.
TEST(Realloc, ABigBufferGrownAgainAndAgainKeepsEveryByte) {
  bool moves = roost_active() && env_option_on("ROOST_MOVE_PAGES", true) && kernel_moves_pages();
  uint64_t moved_before = roost_active() ? stats_snapshot().bytes_moved : 0;
  size_t expected_moved = 0;
  uint64_t id = 11;
  size_t cur = 3 * kMiB + 12345;
  void* p = malloc(cur);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, cur, id);
  for (size_t next : {5 * kMiB, 9 * kMiB + 1, 17 * kMiB, 40 * kMiB + 4096, 70 * kMiB}) {
    void* q = realloc(p, next);
    ASSERT_NE(q, nullptr) << "realloc " << cur << " -> " << next;
    ASSERT_EQ(find_pattern_mismatch(q, cur, id), SIZE_MAX)
        << "content lost in realloc " << cur << " -> " << next;
    if (q != p) expected_moved += cur & ~(2 * kMiB - 1);
    fill_pattern(q, next, ++id);
    p = q;
    cur = next;
  }
  free(p);
  if (moves) {
    EXPECT_GE(stats_snapshot().bytes_moved - moved_before, expected_moved);
  }
}

namespace {
// A word per 4 KiB page of a large block, and its first and last bytes, as
// a function of (id, offset): written whole, checked sparsely.
void mark_pages(void* p, size_t n, uint64_t id) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t at = 0; at + 8 < n; at += 4096) {
    uint64_t v = id * 0x9E3779B97F4A7C15ull + at;
    memcpy(b + at, &v, 8);
  }
  b[n - 1] = static_cast<unsigned char>(id);
}
size_t first_unmarked(const void* p, size_t n, uint64_t id) {
  auto* b = static_cast<const unsigned char*>(p);
  for (size_t at = 0; at + 8 < n; at += 4096) {
    uint64_t v = id * 0x9E3779B97F4A7C15ull + at, got;
    memcpy(&got, b + at, 8);
    if (got != v) return at;
  }
  return b[n - 1] == static_cast<unsigned char>(id) ? SIZE_MAX : n - 1;
}
}  // namespace

namespace {
// One history of the test below, from `seed`.
void large_history(uint64_t seed) {
  std::mt19937_64 rng(seed);
  struct Slot {
    void* p = nullptr;
    size_t n = 0;
    uint64_t id = 0;
  } slot[12];
  uint64_t next_id = 1;
  for (int step = 0; step < 600; step++) {
    Slot& s = slot[rng() % 12];
    size_t n = 256 * 1024 + rng() % (40 * kMiB);
    if (s.p != nullptr) {
      ASSERT_EQ(first_unmarked(s.p, s.n, s.id), SIZE_MAX)
          << "seed " << seed << " step " << step << ", " << s.n << " bytes";
    }
    switch (rng() % 4) {
      case 0:
        free(s.p);
        s = Slot{};
        break;
      case 1: {
        void* q = realloc(s.p, n);
        ASSERT_NE(q, nullptr);
        if (s.p != nullptr) {
          size_t kept = std::min(s.n, n);
          // The marks that lie wholly in what was kept.
          size_t at = first_unmarked(q, kept, s.id);
          ASSERT_TRUE(at == SIZE_MAX || at == kept - 1)
              << "seed " << seed << " step " << step << ": realloc lost byte " << at;
        }
        s = Slot{q, n, next_id++};
        mark_pages(s.p, s.n, s.id);
        break;
      }
      default:
        free(s.p);
        s = Slot{rng() % 2 ? malloc(n) : calloc(1, n), n, next_id++};
        ASSERT_NE(s.p, nullptr);
        mark_pages(s.p, s.n, s.id);
        break;
    }
  }
  for (Slot& s : slot) {
    if (s.p != nullptr) {
      EXPECT_EQ(first_unmarked(s.p, s.n, s.id), SIZE_MAX) << "seed " << seed;
    }
    free(s.p);
  }
}
}  // namespace

// Large blocks of 256 KiB to 40 MiB made, grown, shrunk and freed in
// random order, each page marked: no block loses a byte to another's
// reuse of released memory (roost moves released pages into new blocks and
// a block's own pages into its new place, ROOST_MOVE_PAGES).
TEST(Realloc, LargeBlocksKeepTheirPagesThroughAHistoryOfReuse) {
  for (uint64_t seed : {3, 8, 24}) large_history(seed);
}

TEST(Realloc, PreservesContentBetweenSmallAndLargeInBothDirections) {
  const size_t sizes[] = {10, 8 * kMiB, 100, 300000, 20, 1 * kMiB, 5000, 16, 2 * kMiB + 5, 1};
  size_t cur = 50;
  void* p = malloc(cur);
  uint64_t id = 1000;
  fill_pattern(p, cur, id);
  for (size_t next : sizes) {
    void* q = realloc(p, next);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(find_pattern_mismatch(q, std::min(cur, next), id), SIZE_MAX)
        << "realloc " << cur << " -> " << next;
    fill_pattern(q, next, ++id);
    p = q;
    cur = next;
  }
  free(p);
}

TEST(Realloc, WithinTheUsableSizeStaysInPlace) {
  for (size_t n : {size_t{1}, size_t{100}, size_t{1000}, size_t{5000}, size_t{40000},
                   size_t{100000}, size_t{250000}, 1 * kMiB, 5 * kMiB}) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    size_t usable = malloc_usable_size(p);
    fill_pattern(p, usable, n);
    void* q = realloc(p, usable);
    EXPECT_EQ(q, p) << "realloc(p, malloc_usable_size(p)) moved a block of " << n;
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check_pattern(q, usable, n));
    p = q;
    // The bytes every realloc so far kept (past them, a shrink may have
    // let them go: the secure build's large objects put their canary there).
    size_t kept = usable;
    if (usable > 3) {
      q = realloc(p, usable - 3);
      EXPECT_EQ(q, p) << "shrinking by 3 bytes moved a block of " << n;
      ASSERT_NE(q, nullptr);
      EXPECT_TRUE(check_pattern(q, usable - 3, n));
      p = q;
      kept = usable - 3;
    }
    if (n > 8) {
      q = realloc(p, n - 1);
      EXPECT_EQ(q, p) << "resizing " << n << " to one byte less moved it";
      ASSERT_NE(q, nullptr);
      EXPECT_TRUE(check_pattern(q, std::min(n - 1, kept), n));
      p = q;
    }
    free(p);
  }
}

// A shrink that keeps at least half of a small object's usable bytes
// stays in place (as glibc's, mimalloc's and tcmalloc's do): a program that
// trims its buffers pays no copy for it.  Smaller still, it may move, and
// loses nothing.
TEST(Realloc, AShrinkToHalfTheObjectOrMoreStaysInPlace) {
  for (size_t n :
       {size_t{64}, size_t{100}, size_t{1000}, size_t{5000}, size_t{40000}, size_t{200000}}) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    size_t usable = malloc_usable_size(p);
    fill_pattern(p, usable, n);
    size_t half = (usable + 1) / 2;
    void* q = realloc(p, half);
    EXPECT_EQ(q, p) << "shrinking " << usable << " usable bytes to " << half << " moved them";
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check_pattern(q, half, n));
    void* r = realloc(q, half / 4 + 1);
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(check_pattern(r, half / 4 + 1, n)) << "shrinking " << half << " lost bytes";
    free(r);
  }
}

TEST(Realloc, HugeSizeFailsWithENOMEMAndKeepsTheBlock) {
  for (size_t n : {size_t{100}, size_t{70000}, 2 * kMiB}) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    fill_pattern(p, n, 99);
    for (size_t huge : {SIZE_MAX, static_cast<size_t>(PTRDIFF_MAX) + 1, size_t{1} << 50}) {
      errno = 0;
      void* q = realloc(p, opaque(huge));
      EXPECT_EQ(q, nullptr) << "realloc(p, " << huge << ")";
      EXPECT_EQ(errno, ENOMEM);
      ASSERT_EQ(find_pattern_mismatch(p, n, 99), SIZE_MAX) << "failed realloc damaged the block";
      EXPECT_GE(malloc_usable_size(p), n);
    }
    void* q = realloc(p, n * 2);  // still a live, reallocatable block
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check_pattern(q, n, 99));
    free(q);
  }
}

TEST(Reallocarray, OverflowFailsWithENOMEMAndKeepsTheBlock) {
  void* p = malloc(200);
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 200, 5);
  const size_t cases[][2] = {
      {SIZE_MAX / 2, 3}, {3, SIZE_MAX / 2}, {size_t{1} << 33, size_t{1} << 33}};
  for (const auto& c : cases) {
    errno = 0;
    void* q = reallocarray(p, opaque(c[0]), opaque(c[1]));
    EXPECT_EQ(q, nullptr);
    EXPECT_EQ(errno, ENOMEM);
    ASSERT_TRUE(check_pattern(p, 200, 5)) << "failed reallocarray damaged the block";
  }
  free(p);
}

TEST(Reallocarray, BehavesAsReallocOfTheProduct) {
  void* p = reallocarray(nullptr, 4, 25);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(malloc_usable_size(p), 100u);
  fill_pattern(p, 100, 3);
  void* q = reallocarray(p, 1000, 100);
  ASSERT_NE(q, nullptr);
  EXPECT_GE(malloc_usable_size(q), 100000u);
  EXPECT_TRUE(check_pattern(q, 100, 3));
  fill_pattern(q, 100000, 4);
  p = reallocarray(q, 10, 5);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(check_pattern(p, 50, 4));
  EXPECT_EQ(reallocarray(p, 0, 8), nullptr) << "reallocarray(p, 0, n) frees like realloc(p, 0)";
}

// ---------------------------------------------------------------------------
// aligned_alloc, posix_memalign, memalign

namespace {

enum class AlignFn { kAlignedAlloc, kPosixMemalign, kMemalign };

const char* name_of(AlignFn f) {
  switch (f) {
    case AlignFn::kAlignedAlloc:
      return "aligned_alloc";
    case AlignFn::kPosixMemalign:
      return "posix_memalign";
    case AlignFn::kMemalign:
      return "memalign";
  }
  return "?";
}

void* allocate_aligned(AlignFn f, size_t align, size_t size) {
  switch (f) {
    case AlignFn::kAlignedAlloc:
      return aligned_alloc(align, size);
    case AlignFn::kPosixMemalign: {
      void* p = nullptr;
      return posix_memalign(&p, align, size) == 0 ? p : nullptr;
    }
    case AlignFn::kMemalign:
      return memalign(align, size);
  }
  return nullptr;
}

void check_every_alignment(AlignFn f) {
  uint64_t id = 0;
  for (size_t align = 1; align <= kMiB; align *= 2) {
    if (f == AlignFn::kPosixMemalign && align < sizeof(void*)) continue;  // EINVAL, tested below
    std::vector<size_t> sizes = {0, 1, align - 1, align, align + 1, 3 * align, 100000};
    struct Obj {
      void* p;
      size_t size, usable;
      uint64_t id;
    };
    std::vector<Obj> objs;
    for (size_t size : sizes) {
      void* p = allocate_aligned(f, align, size);
      ASSERT_NE(p, nullptr) << name_of(f) << "(" << align << ", " << size << ")";
      EXPECT_TRUE(is_aligned(p, align))
          << name_of(f) << "(" << align << ", " << size << ") = " << p;
      EXPECT_TRUE(is_aligned(p, std::min<size_t>(align, 16)));
      size_t usable = malloc_usable_size(p);
      EXPECT_GE(usable, size) << name_of(f) << "(" << align << ", " << size << ")";
      fill_pattern(p, usable, id);
      objs.push_back({p, size, usable, id++});
    }
    for (const Obj& o : objs) {
      EXPECT_TRUE(check_pattern(o.p, o.usable, o.id))
          << name_of(f) << "(" << align << ", " << o.size << "): usable bytes overwritten";
      free(o.p);
    }
  }
}

}  // namespace

TEST(AlignedAlloc, HonoursEveryPowerOfTwoAlignmentUpTo1MiB) {
  check_every_alignment(AlignFn::kAlignedAlloc);
}

TEST(PosixMemalign, HonoursEveryPowerOfTwoAlignmentUpTo1MiB) {
  check_every_alignment(AlignFn::kPosixMemalign);
}

TEST(Memalign, HonoursEveryPowerOfTwoAlignmentUpTo1MiB) {
  check_every_alignment(AlignFn::kMemalign);
}

TEST(PosixMemalign, RejectsBadAlignmentsWithEINVALWithoutTouchingAnything) {
  // Not a power of two, or smaller than sizeof(void*).
  const size_t bad[] = {0, 1, 2, 3, 4, 12, 17, 24, 48, 1000, (SIZE_MAX >> 1) + 2, SIZE_MAX};
  for (size_t align : bad) {
    void* sentinel = reinterpret_cast<void*>(0x5a5a5a5a);
    void* out = sentinel;
    errno = 1234;
    int rc = posix_memalign(&out, opaque(align), 16);
    EXPECT_EQ(rc, EINVAL) << "posix_memalign(align " << align << ")";
    EXPECT_EQ(out, sentinel) << "*memptr written on failure, align " << align;
    EXPECT_EQ(errno, 1234) << "errno changed, align " << align;
  }
}

TEST(PosixMemalign, HugeSizeReturnsENOMEMWithoutTouchingThePointer) {
  for (size_t size : {SIZE_MAX, static_cast<size_t>(PTRDIFF_MAX) + 1, size_t{1} << 50}) {
    for (size_t align : {size_t{8}, size_t{64}, size_t{4096}}) {
      void* sentinel = reinterpret_cast<void*>(0x5a5a5a5a);
      void* out = sentinel;
      errno = 1234;
      int rc = posix_memalign(&out, align, opaque(size));
      EXPECT_EQ(rc, ENOMEM) << "posix_memalign(" << align << ", " << size << ")";
      EXPECT_EQ(out, sentinel) << "*memptr written on failure";
      // POSIX reports the error in the return value only.  glibc 2.36
      // nevertheless leaves errno == ENOMEM here; roost leaves it alone.
      // Either is accepted; anything else is not.
      EXPECT_TRUE(errno == 1234 || errno == ENOMEM) << "errno " << errno;
      if (roost_active()) {
        EXPECT_EQ(errno, 1234) << "roost documents errno untouched";
      }
    }
  }
}

TEST(PosixMemalign, ZeroSizeSucceeds) {
  void* out = nullptr;
  ASSERT_EQ(posix_memalign(&out, 64, 0), 0);
  EXPECT_NE(out, nullptr);
  EXPECT_TRUE(is_aligned(out, 64));
  free(out);
}

TEST(AlignedAlloc, NonPowerOfTwoAlignmentFailsWithEINVAL) {
  // C17 and glibc >= 2.38 reject these; Debian's glibc 2.36 accepts them and
  // rounds up as memalign does.
  const size_t bad[] = {0, 3, 24, 17, 48, 100, 4097, SIZE_MAX};
  if (roost_active() || glibc_at_least(38)) {
    for (size_t align : bad) {
      errno = 0;
      void* p = aligned_alloc(opaque(align), 64);
      EXPECT_EQ(p, nullptr) << "aligned_alloc(" << align << ", 64)";
      EXPECT_EQ(errno, EINVAL) << "aligned_alloc(" << align << ", 64)";
      free(p);
    }
  } else {
    if (roost_expected()) FAIL() << "ROOSTTEST_EXPECT=1 but roost is not active";
    for (size_t align : {size_t{3}, size_t{24}, size_t{100}}) {
      void* p = aligned_alloc(opaque(align), 64);
      ASSERT_NE(p, nullptr) << "glibc < 2.38 accepts aligned_alloc(" << align << ", 64)";
      EXPECT_TRUE(is_aligned(p, next_pow2(align)));
      free(p);
    }
  }
}

TEST(AlignedAlloc, HugeSizeFailsWithENOMEM) {
  for (size_t align : {size_t{16}, size_t{4096}, kMiB}) {
    errno = 0;
    void* p = aligned_alloc(align, opaque(SIZE_MAX));
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    p = aligned_alloc(align, opaque(SIZE_MAX - align));
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(errno, ENOMEM);
  }
}

TEST(Memalign, NonPowerOfTwoAlignmentIsRoundedUp) {
  for (size_t align : {size_t{3}, size_t{5}, size_t{24}, size_t{48}, size_t{100}, size_t{1000},
                       size_t{4097}, size_t{65537}}) {
    for (size_t size : {size_t{1}, size_t{100}, size_t{10000}}) {
      void* p = memalign(opaque(align), size);
      ASSERT_NE(p, nullptr) << "memalign(" << align << ", " << size << ")";
      EXPECT_TRUE(is_aligned(p, next_pow2(align)))
          << "memalign(" << align << ", " << size << ") = " << p;
      size_t usable = malloc_usable_size(p);
      EXPECT_GE(usable, size);
      memset(p, 0x55, usable);
      free(p);
    }
  }
}

TEST(Memalign, SmallAlignmentsGiveOrdinaryBlocks) {
  for (size_t align : {size_t{0}, size_t{1}, size_t{2}, size_t{4}, size_t{8}, size_t{16}}) {
    void* p = memalign(opaque(align), 40);
    ASSERT_NE(p, nullptr) << "memalign(" << align << ", 40)";
    EXPECT_TRUE(is_aligned(p, 16));
    EXPECT_GE(malloc_usable_size(p), 40u);
    free(p);
  }
}

TEST(Memalign, AlignmentAboveHalfTheAddressSpaceFailsWithEINVAL) {
  for (size_t align : {(SIZE_MAX >> 1) + 2, SIZE_MAX - 1, SIZE_MAX}) {
    errno = 0;
    void* p = memalign(opaque(align), 16);
    EXPECT_EQ(p, nullptr) << "memalign(" << align << ", 16)";
    EXPECT_EQ(errno, EINVAL) << "memalign(" << align << ", 16)";
  }
  // The largest power of two is a valid alignment that cannot be satisfied.
  errno = 0;
  void* p = memalign(opaque((SIZE_MAX >> 1) + 1), 16);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

// ---------------------------------------------------------------------------
// valloc, pvalloc

TEST(Valloc, ReturnsPageAlignedBlocks) {
  const size_t page = page_size();
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{100}, page - 1, page, page + 1, size_t{100000}, kMiB + 3}) {
    void* p = valloc(n);
    ASSERT_NE(p, nullptr) << "valloc(" << n << ")";
    EXPECT_TRUE(is_aligned(p, page)) << "valloc(" << n << ") = " << p;
    size_t usable = malloc_usable_size(p);
    EXPECT_GE(usable, n);
    memset(p, 0x33, usable);
    free(p);
  }
  errno = 0;
  EXPECT_EQ(valloc(opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Pvalloc, RoundsTheUsableSizeUpToWholePages) {
  const size_t page = page_size();
  for (size_t n : {size_t{1}, size_t{100}, page - 1, page, page + 1, size_t{10000}, kMiB + 1}) {
    void* p = pvalloc(n);
    ASSERT_NE(p, nullptr) << "pvalloc(" << n << ")";
    EXPECT_TRUE(is_aligned(p, page)) << "pvalloc(" << n << ") = " << p;
    size_t usable = malloc_usable_size(p);
    EXPECT_GE(usable, round_up(n, page)) << "pvalloc(" << n << ")";
    memset(p, 0x44, usable);
    free(p);
  }
  for (size_t huge : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - page + 1}) {
    errno = 0;
    EXPECT_EQ(pvalloc(opaque(huge)), nullptr) << "pvalloc(" << huge << ")";
    EXPECT_EQ(errno, ENOMEM);
  }
}

TEST(Pvalloc, ZeroSizeGivesAWholePage) {
  // glibc gives a page-aligned minimal block here; roost documents a page.
  void* p = pvalloc(opaque<size_t>(0));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(p, page_size()));
  free(p);
  REQUIRE_ROOST();
  p = pvalloc(opaque<size_t>(0));
  ASSERT_NE(p, nullptr);
  EXPECT_GE(malloc_usable_size(p), page_size());
  memset(p, 0x11, page_size());
  free(p);
}

// ---------------------------------------------------------------------------
// free_sized, free_aligned_sized (C23; run only where provided, i.e. roost)

TEST(FreeSized, FreesBlocksGivenTheirRequestedSize) {
  REQUIRE_ROOST();
  FreeSizedFn fs = free_sized_fn();
  ASSERT_NE(fs, nullptr) << "roost is active but free_sized is not defined";
  struct roost_stats before = stats_snapshot();
  int count = 0;
  for (size_t n : spread_of_sizes()) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    memset(p, 1, n);
    fs(p, n);
    count++;
  }
  for (size_t n : {size_t{10}, size_t{1000}, size_t{300000}}) {
    void* p = calloc(3, n);
    fs(p, 3 * n);
    void* q = realloc(malloc(n), 2 * n);
    fs(q, 2 * n);
    count += 2;
  }
  fs(nullptr, 0);
  struct roost_stats after = stats_snapshot();
  EXPECT_GE(after.frees - before.frees, static_cast<uint64_t>(count));
  EXPECT_LE(after.bytes_in_use, before.bytes_in_use + 64 * kKiB);
}

TEST(FreeAlignedSized, FreesAlignedBlocksGivenAlignmentAndSize) {
  REQUIRE_ROOST();
  FreeAlignedSizedFn fas = free_aligned_sized_fn();
  ASSERT_NE(fas, nullptr) << "roost is active but free_aligned_sized is not defined";
  struct roost_stats before = stats_snapshot();
  int count = 0;
  for (size_t align = 1; align <= kMiB; align *= 2) {
    for (size_t size : {align, 3 * align, size_t{100000}}) {
      void* p = aligned_alloc(align, size);
      ASSERT_NE(p, nullptr);
      memset(p, 2, size);
      fas(p, align, size);
      count++;
    }
  }
  fas(nullptr, 64, 0);
  struct roost_stats after = stats_snapshot();
  EXPECT_GE(after.frees - before.frees, static_cast<uint64_t>(count));
  EXPECT_LE(after.bytes_in_use, before.bytes_in_use + 64 * kKiB);
}

// ---------------------------------------------------------------------------
// malloc_trim

TEST(MallocTrim, ReturnsZeroOrOneAndKeepsLiveBlocksIntact) {
  std::vector<std::pair<void*, size_t>> live;
  std::vector<void*> dead;
  uint64_t id = 0;
  for (size_t n : spread_of_sizes()) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    if (id % 2 == 0) {
      fill_pattern(p, n, id);
      live.push_back({p, n});
    } else {
      dead.push_back(p);
    }
    id++;
  }
  for (void* p : dead) free(p);
  for (size_t pad : {size_t{0}, size_t{1} << 20, SIZE_MAX}) {
    int rc = malloc_trim(pad);
    EXPECT_TRUE(rc == 0 || rc == 1) << "malloc_trim(" << pad << ") = " << rc;
  }
  for (size_t i = 0; i < live.size(); i++) {
    EXPECT_TRUE(check_pattern(live[i].first, live[i].second, 2 * i))
        << "block of " << live[i].second << " damaged by malloc_trim";
    free(live[i].first);
  }
  for (size_t n : spread_of_sizes()) {  // and everything still works
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    memset(p, 9, n);
    free(p);
  }
}
