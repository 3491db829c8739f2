// The pagemap: unmapped addresses say "not ours", ranges map every granule,
// out-of-range addresses never fault, and the free fast path's lookup finds
// the stray record (no owner) wherever roost owns nothing.
#include "backend/pagemap.h"

#include <gtest/gtest.h>

using namespace roost;

TEST(Pagemap, MapsEveryGranuleOfARangeAndUnmapsIt) {
  ASSERT_TRUE(pagemap::init());
  alignas(64) static ChunkMeta meta;
  uintptr_t base = uintptr_t{0x5a5a} << config::kGranuleBits;  // an address nobody uses
  size_t bytes = 4 * config::kGranule;
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(base)), nullptr);
  pagemap::set_range(base, bytes, &meta);
  for (uintptr_t a = base; a < base + bytes; a += 4096)
    ASSERT_EQ(pagemap::lookup(reinterpret_cast<void*>(a)), &meta);
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(base + bytes)), nullptr);
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(base - 1)), nullptr);
  pagemap::set_range(base, bytes, nullptr);
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(base)), nullptr);
}

TEST(Pagemap, AddressesBeyondTheAddressSpaceAreNotOurs) {
  ASSERT_TRUE(pagemap::init());
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(uintptr_t{1} << 47)), nullptr);
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(~uintptr_t{0})), nullptr);
  EXPECT_EQ(pagemap::lookup(nullptr), nullptr);
}

TEST(Pagemap, TheFastPathLookupFindsTheStrayRecordWhereNothingIsMapped) {
  ASSERT_TRUE(pagemap::init());
  alignas(64) static ChunkMeta meta;
  uintptr_t base = uintptr_t{0x5a5b} << config::kGranuleBits;  // an address nobody uses
  uintptr_t index = pagemap::aligned_index(reinterpret_cast<void*>(base));
  ASSERT_TRUE(pagemap::in_table(index));
  ChunkMeta* stray = pagemap::record_at(index);
  ASSERT_NE(stray, nullptr);
  EXPECT_TRUE(pagemap::is_stray(stray));
  EXPECT_EQ(stray->owner, kNoOwner);
  EXPECT_EQ(stray->kind, ChunkKind::kUnused);
  pagemap::set_range(base, config::kGranule, &meta);
  EXPECT_EQ(pagemap::record_at(index), &meta);
  EXPECT_FALSE(pagemap::is_stray(pagemap::record_at(index)));
  pagemap::set_range(base, config::kGranule, nullptr);
  EXPECT_TRUE(pagemap::is_stray(pagemap::record_at(index)));
  // Null reads as the stray record too: free(NULL) leaves the fast path
  // on the owner comparison.
  uintptr_t null_index = pagemap::aligned_index(nullptr);
  ASSERT_TRUE(pagemap::in_table(null_index));
  EXPECT_TRUE(pagemap::is_stray(pagemap::record_at(null_index)));
  // A misaligned pointer's index is beyond the table.
  EXPECT_FALSE(pagemap::in_table(pagemap::aligned_index(reinterpret_cast<void*>(base + 8))));
}
