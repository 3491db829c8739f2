// Transparent huge pages (backend/huge_pages.h), read back from the
// kernel's own record (/proc/self/smaps: the `hg` flag of a mapping that has
// the advice, its AnonHugePages and Rss).  `always`: huge objects are
// advised inside and lose it on the block a shrink makes their last; `off`
// makes no call.  `dense`, with the looks driven by the test on a clock of
// its own (huge_pages::look(now)): a block wholly in use and resident is
// collapsed at the second look and not the first, a sparse one never, a
// collapsed block loses its huge page when part of it is purged, a heap
// below the floor costs no system call, and a kernel that refuses costs one
// try (unknown: `dense` is off; busy: counted, tried again after a longer
// streak), and the filler takes a small chunk from the fullest block.  Skipped where the kernel's
// THP mode is not `madvise` (there roost gives none), and where the kernel has no huge page to
// give.
#include "backend/huge_pages.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../kernel_thp.h"
#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/pagemap.h"
#include "options.h"
#include "platform/os.h"
#include "scoped_option.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kBlock = 2 * kMiB;

bool kernel_advice_mode() { return roost_test::thp_mode() == "madvise"; }

// Whether the mapping holding `addr` has the huge-page advice (the kernel's
// VmFlags `hg`); fails the test if no mapping holds it.
bool advised(uintptr_t addr) {
  bool hg = false;
  bool held = roost_test::for_each_smaps_field(addr, [&hg](const std::string& line) {
    if (line.rfind("VmFlags:", 0) == 0) hg = (line + " ").find(" hg ") != std::string::npos;
  });
  if (!held) ADD_FAILURE() << "no mapping holds " << std::hex << addr;
  return hg;
}

// The field `name` (kB) summed over the mappings that overlap the block
// at `addr` and the one after it in /proc/self/smaps (moves made by other
// tests may have cut a region into several mappings).
long smaps_kb(uintptr_t addr, const char* name) {
  std::ifstream f("/proc/self/smaps");
  std::string line, key = std::string(name) + ":";
  uintptr_t lo_want = addr & ~(kBlock - 1), hi_want = lo_want + 2 * kBlock;
  bool inside = false, any = false;
  long sum = 0;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo < hi_want && lo_want < hi;
      any = any || inside;
      continue;
    }
    if (inside && line.rfind(key, 0) == 0) sum += std::atol(line.c_str() + key.size());
  }
  if (!any) ADD_FAILURE() << "no mapping holds " << std::hex << addr;
  return sum;
}

class HugePages : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernel_advice_mode()) GTEST_SKIP() << "the kernel's THP mode is not `madvise`";
    ASSERT_TRUE(pagemap::init());
  }
  // Nothing released is purged behind a test's back; the advice is on.
  ScopedOption delay_{options::kPurgeDelayMs, 3600 * 1000};
  ScopedOption on_{options::kHugePages, options::kHugeAlways};

  static ChunkMeta* alloc(size_t size) {
    size_t dirty = 0;
    void* p = large::alloc(size, 4096, &dirty);
    EXPECT_NE(p, nullptr) << size;
    return p == nullptr ? nullptr : pagemap::lookup(p);
  }
};

}  // namespace

TEST_F(HugePages, ARegionIsAdvisedWholeAsItIsReserved) {
  // (A scratch mapping stands in for a region: the test's own regions
  // would keep the advice for the tests after it.)
  void* p = mmap(nullptr, 2 * kBlock, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto base = reinterpret_cast<uintptr_t>(p);
  size_t calls = huge_pages::calls();
  huge_pages::fit_region(base, 2 * kBlock);
  EXPECT_EQ(huge_pages::calls(), calls + 1);
  EXPECT_TRUE(advised(base));
  EXPECT_TRUE(advised(base + 2 * kBlock - 1));
  {
    ScopedOption dense(options::kHugePages, options::kHugeDense);
    EXPECT_FALSE(huge_pages::active());
  }
  munmap(p, 2 * kBlock);
}

TEST_F(HugePages, AHugeObjectIsAdvisedInsideAndLosesItWhereAShrinkPutsItsEnd) {
  size_t size = config::kRegion + 64 * kMiB;
  ChunkMeta* m = alloc(size);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->kind, ChunkKind::kHuge);
  EXPECT_FALSE(advised(m->base));
  EXPECT_TRUE(advised(m->base + kBlock));
  EXPECT_TRUE(advised(m->base + size / 2));
  EXPECT_FALSE(advised(m->base + size - 1));
  size_t shrunk = size / 2 + 3 * kMiB;
  ASSERT_TRUE(large::resize_in_place(m, shrunk));
  EXPECT_FALSE(advised(m->base + shrunk - 1)) << "the new last block";
  EXPECT_TRUE(advised(m->base + kBlock));
  large::free(m);
}

TEST_F(HugePages, SwitchedOffNoCallIsMade) {
  ScopedOption off(options::kHugePages, options::kHugeOff);
  size_t calls = huge_pages::calls();
  for (size_t size : {5 * kMiB, 24 * kMiB, 64 * kMiB, config::kRegion + 64 * kMiB}) {
    ChunkMeta* m = alloc(size);
    ASSERT_NE(m, nullptr);
    large::free(m);
  }
  EXPECT_EQ(huge_pages::calls(), calls);
}

namespace {

os::Collapse pretend(void*, size_t) { return os::Collapse::kDone; }

// `dense`, the looks driven by the test: each look() is given a time two
// hours past the last one, and reset() puts the next look an hour ahead of
// the real clock, so the service thread's own looks find none due.
class DenseHugePages : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernel_advice_mode()) GTEST_SKIP() << "the kernel's THP mode is not `madvise`";
    ASSERT_TRUE(pagemap::init());
    huge_pages::testing::set_heap_floor(0);
    huge_pages::testing::reset();
    // (Other tests' objects, freed, stay dirty and collapsed: gone.)
    chunks::purge_all();
    // Blocks other tests left dense are taken for collapsed (without the
    // kernel) first, so that the looks below see only this test's blocks.
    huge_pages::testing::set_collapse(pretend);
    for (uint64_t tried = ~uint64_t{0}; tried != huge_pages::counts().collapses_tried;) {
      tried = huge_pages::counts().collapses_tried;
      look();
      look();
    }
    huge_pages::testing::set_collapse(nullptr);
    huge_pages::testing::reset();
  }
  void TearDown() override {
    huge_pages::testing::set_collapse(nullptr);
    huge_pages::testing::set_heap_floor(config::kDenseHeapFloor);
    huge_pages::testing::reset();
  }
  // Nothing released is purged behind a test's back.
  ScopedOption delay_{options::kPurgeDelayMs, 3600 * 1000};
  ScopedOption dense_{options::kHugePages, options::kHugeDense};

  uint64_t look() {
    now_ += uint64_t{7200} * 1000 * 1000 * 1000;
    return huge_pages::look(now_);
  }
  // A large object of `size` (a chunk of its own: a power of two), written
  // whole (`dense`) or only its first and last pages.
  static ChunkMeta* object(size_t size, bool dense) {
    size_t dirty = 0;
    void* p = large::alloc(size, 4096, &dirty);
    EXPECT_NE(p, nullptr);
    if (p == nullptr) return nullptr;
    ChunkMeta* m = pagemap::lookup(p);
    EXPECT_EQ(m->base % kBlock, 0u);
    if (dense) {
      std::memset(p, 1, size);
    } else {
      static_cast<char*>(p)[0] = 1;
      static_cast<char*>(p)[size - 1] = 1;
    }
    return m;
  }
  // Two looks: the block is collapsed at the second.  Skips where the
  // kernel had no huge page to give.
  void collapse(ChunkMeta* m) {
    huge_pages::Counts before = huge_pages::counts();
    look();
    ASSERT_FALSE(huge_pages::collapsed(m->base)) << "one look is not enough";
    look();
    huge_pages::Counts after = huge_pages::counts();
    if (after.collapses_refused != before.collapses_refused && !huge_pages::collapsed(m->base))
      GTEST_SKIP() << "the kernel refused MADV_COLLAPSE (no huge page to give, or unknown)";
    ASSERT_TRUE(huge_pages::collapsed(m->base));
  }

  uint64_t now_ = os::now_ns();
};

// Stand-ins for the kernel's answer, counting the calls.
std::atomic<int> g_collapse_calls{0};
os::Collapse unsupported(void*, size_t) {
  g_collapse_calls++;
  return os::Collapse::kUnsupported;
}
os::Collapse busy(void*, size_t) {
  g_collapse_calls++;
  return os::Collapse::kRefused;
}

}  // namespace

TEST_F(DenseHugePages, ADenseBlockIsCollapsedAtTheSecondLook) {
  ChunkMeta* m = object(4 * kMiB, true);
  ASSERT_NE(m, nullptr);
  long huge_before = smaps_kb(m->base, "AnonHugePages");
  long rss_before = smaps_kb(m->base, "Rss");
  huge_pages::Counts before = huge_pages::counts();
  collapse(m);
  if (IsSkipped()) return large::free(m);
  EXPECT_TRUE(huge_pages::collapsed(m->base + kBlock));
  huge_pages::Counts after = huge_pages::counts();
  EXPECT_EQ(after.collapses_done - before.collapses_done, 2u);
  EXPECT_GE(after.blocks_collapsed, before.blocks_collapsed + 2);
  // The kernel's view: 4 MiB more in huge pages, and no more resident.
  EXPECT_GE(smaps_kb(m->base, "AnonHugePages") - huge_before, 4096);
  EXPECT_LE(smaps_kb(m->base, "Rss"), rss_before + 64);
  large::free(m);
  chunks::purge_all();
  EXPECT_FALSE(huge_pages::collapsed(m->base)) << "purged whole";
}

TEST_F(DenseHugePages, ASparseBlockIsNever) {
  ChunkMeta* m = object(4 * kMiB, false);
  ASSERT_NE(m, nullptr);
  huge_pages::Counts before = huge_pages::counts();
  for (int i = 0; i < 6; i++) look();
  EXPECT_FALSE(huge_pages::collapsed(m->base));
  EXPECT_FALSE(huge_pages::collapsed(m->base + kBlock));
  EXPECT_EQ(huge_pages::counts().collapses_tried, before.collapses_tried);
  large::free(m);
}

TEST_F(DenseHugePages, ABlockPurgedInPartLosesItsHugePageFirst) {
  ChunkMeta* m = object(4 * kMiB, true);
  ASSERT_NE(m, nullptr);
  collapse(m);
  if (IsSkipped()) return large::free(m);
  long huge = smaps_kb(m->base, "AnonHugePages");
  long rss = smaps_kb(m->base, "Rss");
  // The shrink purges the tail [2 MiB + 4 KiB, 4 MiB): all of the second
  // block but its first page.
  ASSERT_TRUE(large::resize_in_place(m, 2 * kMiB + 4096));
  EXPECT_TRUE(huge_pages::collapsed(m->base)) << "not purged";
  EXPECT_FALSE(huge_pages::collapsed(m->base + kBlock));
  // The kernel split the second block's huge page and freed the rest.
  EXPECT_LE(smaps_kb(m->base, "AnonHugePages"), huge - 2048);
  EXPECT_LE(smaps_kb(m->base, "Rss"), rss - 2040);
  // Split once: the block waits a longer streak before the next collapse.
  ASSERT_TRUE(large::resize_in_place(m, 4 * kMiB));
  std::memset(reinterpret_cast<void*>(m->base), 3, 4 * kMiB);
  for (int i = 0; i < 3; i++) {
    look();
    EXPECT_FALSE(huge_pages::collapsed(m->base + kBlock)) << "look " << i;
  }
  look();
  EXPECT_TRUE(huge_pages::collapsed(m->base + kBlock) || huge_pages::counts().collapses_refused)
      << "the fourth look";
  large::free(m);
}

TEST_F(DenseHugePages, PagesACollapseMappedGoBackWithTheChunk) {
  // A block-sized chunk whose object leaves its last 8 pages untouched:
  // dense, and the collapse maps those 8 pages (zeros) though the object's
  // record counts only its own pages as written.
  const size_t tail = 8 * config::kMinPageSize;
  size_t dirty = 0;
  void* p = large::alloc(kBlock - tail, config::kMinPageSize, &dirty);
  ASSERT_NE(p, nullptr);
  ChunkMeta* m = pagemap::lookup(p);
  ASSERT_EQ(m->base, reinterpret_cast<uintptr_t>(p));
  ASSERT_EQ(m->order, config::kHugePageBits);
  std::memset(p, 1, kBlock - tail);
  ASSERT_EQ(os::resident_pages(reinterpret_cast<void*>(m->base + kBlock - tail), tail), 0u);
  collapse(m);
  if (IsSkipped()) return large::free(m);
  uintptr_t base = m->base;
  EXPECT_EQ(os::resident_pages(reinterpret_cast<void*>(base + kBlock - tail), tail),
            tail / os::page_size())
      << "the kernel mapped the untouched tail";
  EXPECT_TRUE(huge_pages::filled(base));
  large::free(m);
  // The purge gives back the whole block, the tail the object never wrote
  // included: nothing of it stays resident in memory counted as clean.
  chunks::purge_all();
  EXPECT_EQ(os::resident_pages(reinterpret_cast<void*>(base), kBlock), 0u);
  EXPECT_FALSE(huge_pages::filled(base)) << "purged whole: the next chunk there starts clean";
}

TEST_F(DenseHugePages, ASmallHeapIsNeverCollapsedAndCostsNoSystemCall) {
  huge_pages::testing::set_heap_floor(chunks::bytes_out() + 64 * kMiB);
  ChunkMeta* m = object(4 * kMiB, true);
  ASSERT_NE(m, nullptr);
  size_t calls = huge_pages::testing::look_syscalls();
  huge_pages::Counts before = huge_pages::counts();
  for (int i = 0; i < 4; i++) EXPECT_EQ(look(), UINT64_MAX) << "no look is due";
  EXPECT_FALSE(huge_pages::collapsed(m->base));
  EXPECT_EQ(huge_pages::testing::look_syscalls(), calls);
  EXPECT_EQ(huge_pages::counts().collapses_tried, before.collapses_tried);
  EXPECT_FALSE(huge_pages::wants_look()) << "below the floor: the service is not woken";
  large::free(m);
}

TEST_F(DenseHugePages, AKernelThatDoesNotKnowTheCallCostsOneTry) {
  g_collapse_calls = 0;
  huge_pages::testing::set_collapse(unsupported);
  ChunkMeta* m = object(4 * kMiB, true);
  ASSERT_NE(m, nullptr);
  huge_pages::Counts before = huge_pages::counts();
  for (int i = 0; i < 6; i++) look();
  EXPECT_EQ(g_collapse_calls.load(), 1);
  EXPECT_EQ(huge_pages::counts().collapses_refused, before.collapses_refused + 1);
  EXPECT_FALSE(huge_pages::collapsed(m->base));
  EXPECT_FALSE(huge_pages::dense()) << "`dense` behaves as `off`";
  EXPECT_FALSE(huge_pages::wants_look());
  large::free(m);
}

TEST_F(DenseHugePages, ABusyKernelIsAskedAgainAfterALongerStreak) {
  g_collapse_calls = 0;
  huge_pages::testing::set_collapse(busy);
  ChunkMeta* m = object(2 * kMiB, true);
  ASSERT_NE(m, nullptr);
  huge_pages::Counts before = huge_pages::counts();
  look();
  look();
  EXPECT_EQ(g_collapse_calls.load(), 1) << "tried at the second look";
  EXPECT_EQ(huge_pages::counts().collapses_refused, before.collapses_refused + 1);
  for (int i = 0; i < 3; i++) look();
  EXPECT_EQ(g_collapse_calls.load(), 1) << "not before a streak of four";
  look();
  EXPECT_EQ(g_collapse_calls.load(), 2);
  EXPECT_TRUE(huge_pages::dense()) << "a busy kernel does not turn `dense` off";
  EXPECT_FALSE(huge_pages::collapsed(m->base));
  large::free(m);
}

// The filler: of free chunks of a size, the one in the block with the most
// granules out.  Block A has all but one granule out, block B one; B's free
// 64 KiB chunk heads the list (freed last), A's follows it.
TEST_F(DenseHugePages, TheFillerTakesASmallChunkFromTheFullestBlock) {
  for (uint64_t policy : {options::kHugeDense, options::kHugeOff}) {
    ScopedOption mode(options::kHugePages, policy);
    chunks::purge_all();  // (dirty chunks would be taken first)
    std::vector<ChunkMeta*> a, b;
    for (std::vector<ChunkMeta*>* v : {&a, &b}) {
      ChunkMeta* whole = chunks::alloc(config::kHugePageBits);
      ASSERT_NE(whole, nullptr);
      // Split into granules, in address order.
      std::vector<ChunkMeta*> todo{whole};
      while (!todo.empty()) {
        ChunkMeta* m = todo.back();
        todo.pop_back();
        chunks::split_out(m, config::kGranuleBits,
                          [&](ChunkMeta* piece) { todo.push_back(piece); });
        v->push_back(m);
      }
      std::sort(v->begin(), v->end(),
                [](const ChunkMeta* x, const ChunkMeta* y) { return x->base < y->base; });
      ASSERT_EQ(v->size(), kBlock / config::kGranule);
    }
    uintptr_t a_free = a[1]->base, b_free = b[1]->base;
    chunks::release(a[1], 0);
    for (size_t i = 1; i < b.size(); i++) chunks::release(b[i], 0);  // b[1] first: it stays apart
    ChunkMeta* got = chunks::alloc(config::kGranuleBits);
    ASSERT_NE(got, nullptr);
    if (policy == options::kHugeDense)
      EXPECT_EQ(got->base, a_free) << "the fullest block";
    else
      EXPECT_EQ(got->base, b_free) << "the list's head";
    chunks::release(got, 0);
    for (size_t i = 0; i < a.size(); i++)
      if (i != 1) chunks::release(a[i], 0);
    chunks::release(b[0], 0);
  }
}
