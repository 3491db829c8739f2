// pointer::classify (frontend/pointer.h): the kind of each live object a
// pointer handed back can start (a slab's carved object, a large object, a
// zero-size allocation), and the fault named for each address that starts
// none: inside an object or misaligned, a slot start its slab has not
// carved, a freed large object's start, memory roost does not own.  Each
// fault is a death with its diagnostic's text.
#include "frontend/pointer.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/pagemap.h"
#include "backend/zero_size.h"

using namespace roost;

namespace {

const int kOwner = 0;
constexpr unsigned kClass48 = sizeclass::from_size(48);
constexpr const char* kFreedObject = "invalid pointer (a freed object)";

// A slab of 48-byte objects with only its first 4 carved, mapped in the
// pagemap; retired and released at the end.
struct PartlyCarvedSlab {
  PartlyCarvedSlab() {
    EXPECT_TRUE(pagemap::init());
    m = chunks::alloc(sizeclass::kInfo.info[kClass48].slab_bits);
    EXPECT_NE(m, nullptr);
    slab::start(m, kClass48, &kOwner, false);
    slab::carve(m, nullptr, 4);
  }
  ~PartlyCarvedSlab() {
    slab::retire(m);
    chunks::release(m, dirty_extent(m));
  }
  char* object(size_t i) const { return reinterpret_cast<char*>(m->base + i * m->obj_size); }
  ChunkMeta* m;
};

std::string hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return buf;
}

pointer::Object classify(const void* p, const char* freed_start = checks::kDoubleFree) {
  return pointer::classify(p, nullptr, "free", freed_start);
}

}  // namespace

TEST(Pointer, ACarvedObjectStartIsASlabObject) {
  PartlyCarvedSlab s;
  uint32_t carved = s.m->carved;
  ASSERT_EQ(carved, 4u);
  for (size_t i : {size_t{0}, size_t{1}, size_t{carved} - 1}) {
    pointer::Object o = classify(s.object(i));
    EXPECT_EQ(o.kind, pointer::Kind::kSlab) << i;
    EXPECT_EQ(o.m, s.m) << i;
  }
  // The record the aligned lookup found is taken as it is.
  EXPECT_EQ(pointer::classify(s.object(1), s.m, "free", checks::kDoubleFree).m, s.m);
}

TEST(Pointer, InsideASlabsObjectOrPastItsCarveIsNamed) {
  PartlyCarvedSlab s;
  const std::string size = " \\(size class 48 bytes\\)";
  for (char* p : {s.object(1) + 16, s.object(1) + 1})
    EXPECT_DEATH(classify(p),
                 "roost: free: invalid pointer \\(interior of an object\\) " + hex(p) + size);
  char* never = s.object(s.m->carved);
  EXPECT_DEATH(classify(never),
               "roost: free: invalid pointer \\(never allocated\\) " + hex(never) + size);
}

TEST(Pointer, ALargeObjectsStartIsALargeObjectAndAFreedOnesIsNamed) {
  ASSERT_TRUE(pagemap::init());
  size_t dirty = 0;
  auto* p = static_cast<char*>(large::alloc(size_t{256} << 10, 1, &dirty));
  ASSERT_NE(p, nullptr);
  pointer::Object o = classify(p);
  EXPECT_EQ(o.kind, pointer::Kind::kLarge);
  EXPECT_EQ(o.m, pagemap::lookup(p));
  EXPECT_DEATH(classify(p + 4096),
               "roost: free: invalid pointer \\(interior of an object\\) " + hex(p + 4096));
  large::free(o.m);
  EXPECT_DEATH(classify(p), "roost: free: double free " + hex(p));
  EXPECT_DEATH(classify(p, kFreedObject),
               "roost: free: invalid pointer \\(a freed object\\) " + hex(p));
}

TEST(Pointer, AZeroSizeStepIsAZeroSizeAllocation) {
  ASSERT_TRUE(pagemap::init());
  auto* p = static_cast<char*>(zero_size::alloc(16));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(classify(p).kind, pointer::Kind::kZeroSize);
  EXPECT_DEATH(classify(p + 8),
               "roost: free: invalid pointer \\(not a zero-size allocation\\) " + hex(p + 8));
  EXPECT_TRUE(zero_size::free(p));
}

TEST(Pointer, MemoryRoostDoesNotOwnIsNamed) {
  ASSERT_TRUE(pagemap::init());
  static uint64_t outside[2];
  EXPECT_DEATH(classify(outside),
               "roost: free: invalid pointer \\(not allocated by roost\\) " + hex(outside));
}
