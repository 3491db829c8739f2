// The secure build's guard after large objects (backend/large_guard.h): the
// canary fills exactly the slack between the size asked for and the end,
// whatever their alignment, reads back intact, and any one byte written
// there is the one reported; another key's canary is not this one's; the
// guard page faults on reads and writes while placed and not after it is
// lifted.  The module does not depend on the secure build's switch (only
// large.cc does), so it is tested here in every tree.
#include "backend/large_guard.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "config.h"
#include "platform/os.h"

using namespace roost;

namespace {

// The OS's page: the guard is one of them (4, 16 or 64 KiB).
const size_t kPage = os::page_size();
constexpr uint64_t kKey = 0x9e3779b97f4a7c15ull;

// Page-aligned memory of `pages` pages, every byte 0xaa.
struct Pages {
  explicit Pages(size_t pages) : bytes(pages * kPage) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(base, MAP_FAILED);
    memset(base, 0xaa, bytes);
  }
  ~Pages() { munmap(base, bytes); }
  uintptr_t at() const { return reinterpret_cast<uintptr_t>(base); }
  unsigned char* byte(size_t i) const { return static_cast<unsigned char*>(base) + i; }
  size_t bytes;
  void* base;
};

}  // namespace

TEST(LargeGuard, TheCanaryFillsTheSlackExactlyAndReadsBackIntact) {
  Pages m(3);
  for (size_t size : {size_t{2} * kPage, 2 * kPage - 1, 2 * kPage - 7, 2 * kPage - 8, 2 * kPage - 9,
                      kPage + 1, kPage + 13, kPage + 4000}) {
    memset(m.base, 0xaa, m.bytes);
    large_guard::fill_slack(m.at(), size, 2 * kPage, kKey);
    EXPECT_EQ(large_guard::first_overwritten(m.at(), size, 2 * kPage, kKey), 0u) << size;
    // Below the size asked for and from the end on, nothing was written.
    for (size_t i = 0; i < size; i++) ASSERT_EQ(*m.byte(i), 0xaa) << size << " at " << i;
    for (size_t i = 2 * kPage; i < m.bytes; i++) ASSERT_EQ(*m.byte(i), 0xaa) << size << " at " << i;
    // Another key's canary is not this one.
    if (size < 2 * kPage - 8)
      EXPECT_NE(large_guard::first_overwritten(m.at(), size, 2 * kPage, kKey ^ 0x5a5a), 0u);
  }
}

TEST(LargeGuard, AnyOneByteWrittenInTheSlackIsTheOneReported) {
  Pages m(2);
  size_t size = kPage + 13, end = 2 * kPage;
  for (size_t i = size; i < end; i++) {
    large_guard::fill_slack(m.at(), size, end, kKey);
    unsigned char was = *m.byte(i);
    *m.byte(i) = static_cast<unsigned char>(was ^ 1);
    ASSERT_EQ(large_guard::first_overwritten(m.at(), size, end, kKey), m.at() + i) << i;
    // With a later byte written too, the first is still the one named.
    if (i + 9 < end) {
      *m.byte(i + 9) ^= 0xff;
      ASSERT_EQ(large_guard::first_overwritten(m.at(), size, end, kKey), m.at() + i) << i;
    }
  }
}

TEST(LargeGuard, NoSlackIsIntact) {
  Pages m(1);
  large_guard::fill_slack(m.at(), kPage, kPage, kKey);
  EXPECT_EQ(large_guard::first_overwritten(m.at(), kPage, kPage, kKey), 0u);
  for (size_t i = 0; i < m.bytes; i++) ASSERT_EQ(*m.byte(i), 0xaa);
}

TEST(LargeGuard, ThePlacedPageFaultsUntilLifted) {
  Pages m(3);
  auto* guard = reinterpret_cast<volatile char*>(m.byte(kPage));
  ASSERT_TRUE(large_guard::place(m.at() + kPage));
  EXPECT_DEATH((void)guard[0], "");
  EXPECT_DEATH(guard[kPage - 1] = 1, "");
  // The pages either side are untouched.
  *m.byte(kPage - 1) = 1;
  *m.byte(2 * kPage) = 1;
  ASSERT_TRUE(large_guard::lift(m.at() + kPage));
  guard[0] = 2;
  guard[kPage - 1] = 3;
  EXPECT_EQ(guard[0], 2);
  EXPECT_EQ(static_cast<unsigned char>(guard[1]), 0xaa);
}
