// Zero-size allocations (backend/zero_size.h): 16-byte steps in one range
// the pagemap maps to a kZeroSize record, aligned when asked, never two
// live ones at one address (the steps go round the range, skipping live
// ones), a second free seen, and faulting on every read and write.  The module does not depend on
// the secure build's switch (only its callers do), so it is tested here in every tree.
#include "backend/zero_size.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "backend/pagemap.h"
#include "config.h"

using namespace roost;

namespace {

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST(ZeroSize, StepsAreUniqueAlignedAndMappedToTheRangesRecord) {
  ASSERT_TRUE(pagemap::init());
  std::set<uintptr_t> seen;
  for (int i = 0; i < 1000; i++) {
    void* p = zero_size::alloc(16);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(addr(p) % 16, 0u);
    EXPECT_TRUE(seen.insert(addr(p)).second) << "handed out twice: " << p;
    ChunkMeta* m = pagemap::lookup(p);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->kind, ChunkKind::kZeroSize);
  }
  for (size_t align : {size_t{32}, size_t{256}, config::kZeroSizeMaxAlign}) {
    void* p = zero_size::alloc(align);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(addr(p) % align, 0u) << align;
    EXPECT_TRUE(seen.insert(addr(p)).second);
  }
  for (uintptr_t a : seen) EXPECT_TRUE(zero_size::free(reinterpret_cast<void*>(a)));
}

// Freed as they come: the steps go round the range and come back to the
// first.
TEST(ZeroSize, TheRangeIsGoneRoundThenStartsOver) {
  ASSERT_TRUE(pagemap::init());
  void* first = zero_size::alloc(16);
  ASSERT_TRUE(zero_size::free(first));
  uintptr_t lowest = addr(first), highest = addr(first);
  constexpr size_t kSteps = config::kZeroSizeRangeBytes / config::kMinAlloc;
  bool back = false;
  for (size_t i = 1; i <= kSteps; i++) {
    void* p = zero_size::alloc(16);
    ASSERT_NE(p, nullptr);
    lowest = addr(p) < lowest ? addr(p) : lowest;
    highest = addr(p) > highest ? addr(p) : highest;
    back |= p == first;
    ASSERT_TRUE(zero_size::free(p));
  }
  EXPECT_TRUE(back) << "the range was gone round without coming back to its first step";
  EXPECT_EQ(highest - lowest, config::kZeroSizeRangeBytes - config::kMinAlloc);
}

// One still allocated when the steps come round again is skipped.
TEST(ZeroSize, ALiveOneIsNotHandedOutAgain) {
  ASSERT_TRUE(pagemap::init());
  void* kept = zero_size::alloc(16);
  constexpr size_t kSteps = config::kZeroSizeRangeBytes / config::kMinAlloc;
  for (size_t i = 1; i <= kSteps; i++) {
    void* p = zero_size::alloc(16);
    ASSERT_NE(p, kept) << "after " << i << " steps";
    ASSERT_TRUE(zero_size::free(p));
  }
  ASSERT_TRUE(zero_size::free(kept));
}

TEST(ZeroSize, ASecondFreeIsSeen) {
  ASSERT_TRUE(pagemap::init());
  void* p = zero_size::alloc(16);
  EXPECT_TRUE(zero_size::free(p));
  EXPECT_FALSE(zero_size::free(p));
}

TEST(ZeroSize, ReadsAndWritesFault) {
  ASSERT_TRUE(pagemap::init());
  auto* p = static_cast<volatile char*>(zero_size::alloc(16));
  EXPECT_DEATH((void)p[0], "");
  EXPECT_DEATH(p[8] = 1, "");
}
