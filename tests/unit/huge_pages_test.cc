// Transparent huge pages inside large objects (backend/huge_pages.h), read
// back from the kernel's own record of the advice (the `hg` flag of the
// mapping in /proc/self/smaps): every block of a large object between its
// first and last has it, its first and last never, also when a chunk is
// reused by an object that ends inside what was advised for the last one;
// chunks handed to the slabs never lie in an advised block; huge objects (mapped
// alone) are advised inside, and lose it on the block a shrink makes their
// last; ROOST_HUGEPAGES=0 makes no call.  Skipped where the kernel's THP mode
// is not `madvise` (there roost gives no advice).
#include "backend/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/pagemap.h"
#include "frontend/chunk_cache.h"
#include "options.h"
#include "scoped_option.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kBlock = 2 * kMiB;

// Read here rather than through os::huge_pages_on_advice(): were that wrong
// and false, every test below would skip instead of failing.
bool kernel_advice_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return std::getline(f, line) && line.find("[madvise]") != std::string::npos;
}

// Whether the mapping holding `addr` has the huge-page advice (the kernel's
// VmFlags `hg`); fails the test if no mapping holds it.
bool advised(uintptr_t addr) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0)
      return (line + " ").find(" hg ") != std::string::npos;
  }
  ADD_FAILURE() << "no mapping holds " << std::hex << addr;
  return false;
}

class HugePages : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernel_advice_mode()) GTEST_SKIP() << "the kernel's THP mode is not `madvise`";
    ASSERT_TRUE(pagemap::init());
  }
  // Nothing released is purged behind a test's back; the advice is on.
  ScopedOption delay_{options::kPurgeDelayMs, 3600 * 1000};
  ScopedOption on_{options::kHugePages, 1};

  static ChunkMeta* alloc(size_t size) {
    size_t dirty = 0;
    void* p = large::alloc(size, 4096, &dirty);
    EXPECT_NE(p, nullptr) << size;
    return p == nullptr ? nullptr : pagemap::lookup(p);
  }

  // Expects the advice on exactly the blocks of `m` between its first and
  // last.
  static void expect_advice(const ChunkMeta* m) {
    uintptr_t first = m->base, last = (m->base + m->large_size - 1) & ~(kBlock - 1);
    EXPECT_FALSE(advised(first)) << "first block";
    EXPECT_FALSE(advised(last)) << "last block";
    for (uintptr_t b = first + kBlock; b < last; b += kBlock)
      EXPECT_TRUE(advised(b)) << "block " << (b - first) / kBlock;
  }
};

}  // namespace

TEST_F(HugePages, TheInsideOfALargeObjectIsAdvisedItsEndsAreNot) {
  for (size_t size : {5 * kMiB, 24 * kMiB + 4096, 32 * kMiB}) {
    ChunkMeta* m = alloc(size);
    ASSERT_NE(m, nullptr);
    expect_advice(m);
    large::free(m);
  }
}

TEST_F(HugePages, AChunkReusedByASmallerObjectLosesTheAdviceAtItsNewEnd) {
  chunks::purge_all();
  ChunkMeta* m = alloc(32 * kMiB);
  ASSERT_NE(m, nullptr);
  uintptr_t base = m->base;
  expect_advice(m);
  large::free(m);
  // The dirty chunk serves the next object of its size, whose last block
  // was inside the first.
  m = alloc(20 * kMiB);
  ASSERT_NE(m, nullptr);
  if (m->base != base) GTEST_SKIP() << "the chunk was not reused";
  expect_advice(m);
  EXPECT_TRUE(advised(base + 24 * kMiB)) << "past the object: left as it was";
  large::free(m);
}

TEST_F(HugePages, ChunksTakenForSlabsAreNeverInAnAdvisedBlock) {
  ChunkMeta* m = alloc(64 * kMiB);
  ASSERT_NE(m, nullptr);
  uintptr_t lo = m->base + kBlock, hi = m->base + 64 * kMiB - kBlock;
  ASSERT_TRUE(advised(lo));
  large::free(m);
  chunks::purge_all();  // the chunk merges with its buddies, its blocks keep the advice
  // A cache takes slab chunks until one lies where the object's inside was
  // (all free memory is handed out before a new region is made).
  struct Cache : ChunkCache {
    Cache() : saved(set_shortage_hook(nullptr)) {}
    ~Cache() {
      trim(0);
      set_shortage_hook(saved);
    }
    ShortageHook saved;
  } cache;
  ScopedOption reserve(options::kSlabReserveBytes, 0);
  std::vector<ChunkMeta*> taken;
  bool landed = false;
  size_t limit = chunks::reserved_bytes() / config::kGranule;
  for (size_t i = 0; i < limit && !landed; i++) {
    ChunkMeta* c = cache.take(config::kGranuleBits);
    ASSERT_NE(c, nullptr);
    taken.push_back(c);
    landed = c->base >= lo && c->base < hi;
  }
  EXPECT_TRUE(landed) << "no slab chunk came from the freed object's inside";
  for (ChunkMeta* c : taken) EXPECT_FALSE(advised(c->base)) << std::hex << c->base;
  for (ChunkMeta* c : taken) chunks::release(c, 0);
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
  ScopedOption off(options::kHugePages, 0);
  size_t calls = huge_pages::calls();
  for (size_t size : {5 * kMiB, 24 * kMiB, 64 * kMiB}) {
    ChunkMeta* m = alloc(size);
    ASSERT_NE(m, nullptr);
    large::free(m);
  }
  EXPECT_EQ(huge_pages::calls(), calls);
}
