// roost under an address-space limit (RLIMIT_AS, `ulimit -v`), where every
// reserved byte counts against the program: the size classes whose slabs
// span a megabyte or more are served as large objects of the class's size
// (granule-aligned chunks, counted as large allocations, no slab), with
// every call of the malloc family working on them as on any object, and an
// object bigger than the regions the limit allows is mapped alone and its
// address space given back when it is freed.
//
// main() sets a 2 GiB limit and executes the test again, so that the limit
// is in force from the process's start, before roost reads it.  Built linked
// to libroost.a (.static), libroost-secure.a (.secure_static, with
// ROOST_TEST_SECURE: sized frees are checked there) and libroost-hardened.a
// (.hardened_static).
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "roost.h"

extern "C" void free_sized(void* p, size_t size);

namespace {

constexpr size_t kLimit = size_t{2} << 30;
constexpr uintptr_t kGranule = 64 << 10;

uint64_t large_allocations() {
  struct roost_stats s;
  EXPECT_EQ(roost_stats(&s), 0);
  return s.large_allocations;
}

// The address space the process holds (VmSize), in bytes.
size_t address_space_used() {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f != nullptr) {
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

TEST(ScarceAddressSpace, TheLimitIsInForce) {
  struct rlimit r;
  ASSERT_EQ(getrlimit(RLIMIT_AS, &r), 0);
  EXPECT_EQ(r.rlim_cur, kLimit);
}

// Objects of the classes above 32 KiB: each a large object of its own
// (aligned to the granule, one large allocation each), none in a slab.
TEST(ScarceAddressSpace, ClassesWithMegabyteSlabsAreLargeObjects) {
  for (size_t size : {40000, 65536, 100000, 200000, 262144}) {
    std::vector<void*> objects;
    uint64_t before = large_allocations();
    for (int i = 0; i < 4; i++) {
      void* p = malloc(size);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kGranule, 0u) << size;
      EXPECT_GE(malloc_usable_size(p), size);
      EXPECT_LT(malloc_usable_size(p), size + size / 4 + 4096) << size;
      memset(p, 0x5a, size);
      objects.push_back(p);
    }
    EXPECT_EQ(large_allocations() - before, 4u) << size;
    for (void* p : objects) free(p);
  }
  // Smaller classes keep their slabs.
  uint64_t before = large_allocations();
  void* p = malloc(20000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(large_allocations(), before);
  free(p);
}

TEST(ScarceAddressSpace, TheMallocFamilyWorksOnThem) {
  // calloc of memory a freed object dirtied reads as zero.
  void* dirty = malloc(100000);
  ASSERT_NE(dirty, nullptr);
  memset(dirty, 0xab, 100000);
  free(dirty);
  auto* z = static_cast<unsigned char*>(calloc(1, 100000));
  ASSERT_NE(z, nullptr);
  for (size_t i = 0; i < 100000; i++) ASSERT_EQ(z[i], 0) << i;
  free(z);
  // realloc up to a large size and down to a small class keeps the bytes.
  auto* p = static_cast<unsigned char*>(malloc(70000));
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 70000; i++) p[i] = static_cast<unsigned char>(i * 7);
  p = static_cast<unsigned char*>(realloc(p, 300000));
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 70000; i++) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7)) << i;
  p = static_cast<unsigned char*>(realloc(p, 50000));
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 50000; i++) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7)) << i;
  p = static_cast<unsigned char*>(realloc(p, 1000));
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 1000; i++) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7)) << i;
  free(p);
  // Aligned allocations of those classes.
  void* a = aligned_alloc(32768, 70000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 32768, 0u);
  free(a);
  void* m = nullptr;
  ASSERT_EQ(posix_memalign(&m, 65536, 131072), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m) % 65536, 0u);
  free(m);
  // Sized frees with the size asked for (checked in the secure build), a
  // class's own size among them (the hardened build's canary word takes
  // such an object to the next class).
  for (size_t size : {40000, 40960, 65536, 100000, 262144}) {
    void* s = malloc(size);
    ASSERT_NE(s, nullptr);
    free_sized(s, size);
  }
}

#if defined(ROOST_TEST_SECURE)
TEST(ScarceAddressSpaceDeathTest, ASizedFreeOfAnotherClassIsAMismatch) {
  EXPECT_DEATH(
      {
        void* s = malloc(100000);
        free_sized(s, 200000);
      },
      "size mismatch");
}
#endif

// An object bigger than the regions the limit allows (2 GiB / 16) is mapped
// alone: its address space is the program's again once it is freed.
TEST(ScarceAddressSpace, ObjectsBeyondARegionGiveTheirAddressSpaceBack) {
  constexpr size_t kBig = size_t{200} << 20;
  size_t before = address_space_used();
  void* p = malloc(kBig);
  ASSERT_NE(p, nullptr);
  memset(p, 1, 4096);
  EXPECT_GE(address_space_used(), before + kBig);
  free(p);
  EXPECT_LT(address_space_used(), before + (size_t{16} << 20));
  // And again, many times: nothing accumulates.
  for (int i = 0; i < 20; i++) {
    void* q = malloc(kBig + static_cast<size_t>(i) * 4096);
    ASSERT_NE(q, nullptr);
    free(q);
  }
  EXPECT_LT(address_space_used(), before + (size_t{16} << 20));
}

}  // namespace

int main(int argc, char** argv) {
  // The limit from the start: set it, then run this program again.
  if (getenv("ROOSTTEST_LIMITED") == nullptr) {
    struct rlimit r = {kLimit, kLimit};
    if (setrlimit(RLIMIT_AS, &r) != 0 || setenv("ROOSTTEST_LIMITED", "1", 1) != 0) {
      perror("scarce_address_space_test: setting the limit");
      return 1;
    }
    execv("/proc/self/exe", argv);
    perror("scarce_address_space_test: exec");
    return 1;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
