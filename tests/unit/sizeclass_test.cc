// Size classes: round trip, smallest fit, waste bound, alignment, table and
// clz paths agree, and the object-start test is exact.
#include "ds/sizeclass.h"

#include <gtest/gtest.h>

using namespace roost;
using namespace roost::sizeclass;

TEST(SizeClass, FirstClassesAreSixteenApartThenFourPerDoubling) {
  const size_t expected[] = {16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320};
  for (unsigned i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
    EXPECT_EQ(to_size(i), expected[i]) << "class " << i;
  EXPECT_EQ(to_size(kCount - 1), config::kMaxSmall);
}

TEST(SizeClass, RoundTripForEveryClass) {
  for (unsigned sc = 0; sc < kCount; sc++) {
    EXPECT_EQ(from_size(to_size(sc)), sc);
    EXPECT_EQ(kInfo.info[sc].size, to_size(sc));
  }
}

TEST(SizeClass, EverySizeGetsTheSmallestClassThatHoldsIt) {
  for (size_t size = 1; size <= config::kMaxSmall; size += (size < 70000 ? 1 : 7)) {
    unsigned sc = from_size(size);
    ASSERT_LT(sc, kCount);
    ASSERT_GE(to_size(sc), size) << size;
    if (sc > 0) ASSERT_LT(to_size(sc - 1), size) << size;
  }
  EXPECT_EQ(from_size(0), 0u);
}

TEST(SizeClass, WasteIsAtMostAQuarterBeyondTheSixteenByteGrain) {
  for (size_t size = 1; size <= config::kMaxSmall; size++) {
    size_t cls = to_size(from_size(size));
    size_t waste = cls - size;
    ASSERT_TRUE(waste < 16 || waste * 4 <= cls) << "size " << size << " class " << cls;
  }
}

TEST(SizeClass, EveryClassIsSixteenByteAligned) {
  for (unsigned sc = 0; sc < kCount; sc++) EXPECT_EQ(to_size(sc) % 16, 0u) << sc;
}

TEST(SizeClass, TableAndClzAgree) {
  for (size_t size = 1; size <= config::kTableClassified; size++)
    ASSERT_EQ(from_size_table(size), from_size_clz(size)) << size;
}

TEST(SizeClass, SlabsHoldAtLeastSixteenObjectsAndAreGranules) {
  for (unsigned sc = 0; sc < kCount; sc++) {
    const ClassInfo& info = kInfo.info[sc];
    EXPECT_GE(info.capacity, 16u) << sc;
    EXPECT_GE(size_t{1} << info.slab_bits, config::kGranule) << sc;
    EXPECT_EQ(info.capacity, (size_t{1} << info.slab_bits) / info.size) << sc;
    EXPECT_LE(info.carve, info.capacity) << sc;
    EXPECT_GE(info.carve, 1u) << sc;
    EXPECT_GE(info.wake, 1u) << sc;
  }
}

// A carve touches a page, or at most kMaxCarveBytes to give bigger objects
// batches of up to kMinCarveObjects: never more pages than that.
TEST(SizeClass, CarvesTouchFewPages) {
  for (unsigned sc = 0; sc < kCount; sc++) {
    const ClassInfo& info = kInfo.info[sc];
    size_t bytes = size_t{info.carve} * info.size;
    if (info.size <= config::kCarveBytes)
      EXPECT_GE(bytes + info.size, config::kCarveBytes) << sc;  // about a page at least
    if (info.carve > 1) EXPECT_LE(bytes, config::kMaxCarveBytes) << sc;
    if (info.size * config::kMinCarveObjects <= config::kMaxCarveBytes)
      EXPECT_GE(info.carve, config::kMinCarveObjects) << sc;
    // A class's first carve: one small page, or one object bigger than that.
    EXPECT_GE(info.first_carve, 1u) << sc;
    EXPECT_LE(info.first_carve, info.carve) << sc;
    if (info.first_carve > 1) EXPECT_LE(info.first_carve * info.size, config::kCarveBytes) << sc;
    EXPECT_GT((info.first_carve + 1) * info.size, config::kCarveBytes) << sc;
  }
}

TEST(SizeClass, ObjectStartTestIsExactOverTheWholeSlab) {
  // Every 16-byte unit of a 4 MiB slab (the biggest any class has) for
  // every class: a multiple of the object size exactly when the
  // multiply-and-compare says so.
  for (unsigned sc = 0; sc < kCount; sc++) {
    const ClassInfo& info = kInfo.info[sc];
    ASSERT_LE(info.slab_bits, 22u) << sc;
    for (uint32_t unit = 0; unit < (1u << 18); unit++)
      ASSERT_EQ(is_multiple(unit, info.inverse), uint64_t{unit} * 16 % info.size == 0)
          << sc << " " << unit;
  }
  // The test's bound (unit offsets below 2^18, object sizes up to 2^14
  // units) for sizes that are no class's: odd unit counts, which have no
  // shortcut through low bits, and the largest.
  for (uint32_t units : {3u, 5u, 7u, 12289u, 16383u, 16384u}) {
    uint32_t inverse = inverse_of(size_t{units} * 16);
    for (uint32_t unit = 0; unit < (1u << 18); unit++)
      ASSERT_EQ(is_multiple(unit, inverse), unit % units == 0) << units << " " << unit;
  }
}
