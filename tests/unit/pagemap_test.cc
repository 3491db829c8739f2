// The pagemap: unmapped addresses say "not ours", ranges map every granule,
// out-of-range addresses never fault.
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
