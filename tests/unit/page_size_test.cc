// The OS's page size (config.h, platform/os.h): every computation that
// depends on it, at each page an AArch64 kernel may have (4, 16 and 64 KiB;
// x86-64's is 4 KiB) whatever page this process runs with, and the platform
// layer's ranges at the page this process has (4 KiB natively; `make
// test-aarch64` runs these tests again under qemu-user reporting 16 and
// 64 KiB pages).  What must hold at every page: the sizes config.h fixes
// are whole pages; a large object's bytes are whole pages, so its end (the
// guard page, an in-place shrink's tail) is page-aligned and stays inside
// its chunk; a purge of a dirty extent covers whole pages inside its chunk;
// the guard's canary fills a slack of up to a page; the OS is handed only
// ranges that start on a page, and acts on every page they touch.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/large.h"
#include "backend/large_guard.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/sizeclass.h"
#include "platform/os.h"

using namespace roost;

namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;
constexpr size_t kPages[] = {4 * kKiB, 16 * kKiB, 64 * kKiB};

// The chunk large.cc takes for `span` bytes: a power of two, at least a
// granule.
size_t chunk_for(size_t span) {
  size_t chunk = bits::next_pow2(span);
  return chunk < config::kGranule ? config::kGranule : chunk;
}

bool on_page(uintptr_t a, size_t page) { return a % page == 0; }

// The permissions /proc/self/maps gives the mapping holding `p` ("rw-p",
// "---p", ...), or "" when none does.
std::string protection_of(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == nullptr) return "";
  char line[512];
  std::string found;
  while (found.empty() && fgets(line, sizeof line, maps) != nullptr) {
    unsigned long long from = 0, to = 0;
    char perms[8] = {};
    if (sscanf(line, "%llx-%llx %7s", &from, &to, perms) == 3 && a >= from && a < to) found = perms;
  }
  fclose(maps);
  return found;
}

}  // namespace

TEST(PageSize, PowersOfTwoFrom4To64KiBAreSupportedAndNothingElse) {
  for (size_t page : kPages) EXPECT_TRUE(config::page_size_supported(page)) << page;
  EXPECT_TRUE(config::page_size_supported(8 * kKiB));
  for (size_t page : {size_t{0}, size_t{1}, 2 * kKiB, 12 * kKiB, 48 * kKiB, 128 * kKiB, kMiB})
    EXPECT_FALSE(config::page_size_supported(page)) << page;
  // The kernel this process runs on has one roost supports.
  EXPECT_TRUE(config::page_size_supported(os::page_size())) << os::page_size();
}

// Every range whose size config.h fixes and that the OS sees a call on (or
// that a chunk's base is aligned to) is whole pages of every size.
TEST(PageSize, TheSizesConfigFixesAreWholePagesOfEverySize) {
  for (size_t page : kPages) {
    EXPECT_EQ(config::kGranule % page, 0u) << page;
    EXPECT_EQ(config::kRegion % page, 0u) << page;
    EXPECT_EQ(config::kZeroSizeRangeBytes % page, 0u) << page;
    // The pagemap grows a slot's entries at a time.
    EXPECT_EQ((config::kRegion >> config::kGranuleBits) * sizeof(uintptr_t) % page, 0u) << page;
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++)
      EXPECT_EQ(sizeclass::slab_size(sc) % page, 0u) << page << " class " << sc;
  }
  EXPECT_EQ(config::kMaxPageSize, 64 * kKiB);
  EXPECT_GE(config::kGranule, config::kMaxPageSize);
}

// A large object's bytes are whole pages; with its guard page (secure build)
// it fits the span it asks for and the chunk that span gets, and from any
// granule-aligned base its end is on a page.
TEST(PageSize, LargeObjectsAreWholePagesEndingOnAPageInsideTheirChunk) {
  const size_t sizes[] = {config::kMaxSmall + 1, 300 * kKiB + 5,   320 * kKiB, kMiB - 1, kMiB,
                          3 * kMiB + 1,          64 * kMiB - 4096, kGiB - 1,   kGiB + 1};
  const size_t aligns[] = {16, 4 * kKiB, 64 * kKiB, kMiB, 2 * kGiB};
  const uintptr_t bases[] = {config::kGranule, 7 * config::kGranule, uintptr_t{5} << 30};
  for (size_t page : kPages) {
    for (size_t guard : {size_t{0}, page}) {
      for (size_t size : sizes) {
        size_t usable = large::usable_for(size, page);
        ASSERT_EQ(usable % page, 0u) << page << " " << size;
        // Slack for the canary where there is one (at least a byte, at
        // most a page), else under a page.
        ASSERT_GE(usable, size + large::kCanarySlackMin);
        ASSERT_LT(usable - size, page + large::kCanarySlackMin);
        // The canary's slack (secure build) fits its 32-bit record field.
        ASSERT_LE(usable - size, UINT32_MAX);
        for (size_t align : aligns) {
          size_t span = large::span_for(usable, guard, align);
          ASSERT_GE(span, usable + guard);
          ASSERT_GE(span, align);
          size_t chunk = chunk_for(span);
          ASSERT_LE(usable + guard, chunk);
          for (uintptr_t base : bases) {
            // The guard page (and every range handed to the OS from the
            // object's end) starts on a page.
            ASSERT_TRUE(on_page(base + usable, page)) << page << " " << size;
            ASSERT_TRUE(on_page(base + usable + guard, page));
          }
        }
      }
    }
    EXPECT_EQ(large::guard_for(page), config::kGuardLarge ? page : 0);
  }
}

// Resized in place, an object stays in its chunk with its guard page, its
// new end on a page; a shrink's purge of the tail starts there and covers
// whole pages inside the chunk; a huge object keeps whole pages when its
// tail is unmapped.
TEST(PageSize, InPlaceResizesKeepTheEndOnAPageAndTheTailInsideTheChunk) {
  for (size_t page : kPages) {
    for (size_t guard : {size_t{0}, page}) {
      for (unsigned order = config::kGranuleBits + 2; order <= 24; order++) {
        const size_t chunk = size_t{1} << order;
        for (size_t size = chunk / 4 - page; size <= chunk + page; size += chunk / 64 + 4095) {
          size_t usable = large::usable_for(size, page);
          if (!large::stays_in_chunk(usable, guard, chunk)) {
            EXPECT_TRUE(usable + guard > chunk || usable * 4 <= chunk);
            continue;
          }
          ASSERT_LE(usable + guard, chunk);
          ASSERT_GT(usable * 4, chunk);
          ASSERT_TRUE(on_page(usable, page));
          // Every dirty extent the chunk may have (counted in 4 KiB pages),
          // a megabyte or more beyond the new end: the purge of the tail.
          for (size_t extent = usable + kMiB; extent <= chunk; extent += 4 * kKiB * 97) {
            size_t purged = bits::align_up(extent - usable, page);
            ASSERT_LE(usable + purged, chunk) << page << " " << chunk << " " << size;
          }
        }
      }
      // Huge objects: the mapping kept after a shrink is whole pages.
      for (size_t size : {kGiB + 1, kGiB + page - 1, kGiB + kGiB / 2 - 5})
        EXPECT_EQ((large::usable_for(size, page) + guard) % page, 0u);
    }
  }
}

// A chunk's dirty extent is counted in 4 KiB pages from its base; a purge
// of it covers the OS's whole pages, which stay inside the chunk for every
// chunk size and extent.
TEST(PageSize, DirtyExtentsPurgeWholePagesInsideTheirChunk) {
  for (size_t page : kPages) {
    for (unsigned order = config::kGranuleBits; order <= config::kRegionBits; order++) {
      const size_t chunk = size_t{1} << order;
      const size_t step = chunk / 16 > config::kMinPageSize ? chunk / 16 + config::kMinPageSize
                                                            : config::kMinPageSize;
      for (size_t pages = 1; pages * config::kMinPageSize <= chunk;
           pages += step / config::kMinPageSize) {
        size_t extent = pages << config::kMinPageBits;
        ASSERT_LE(bits::align_up(extent, page), chunk) << page << " " << chunk << " " << extent;
      }
      EXPECT_EQ(bits::align_up(chunk, page), chunk);
    }
  }
}

// The secure build's canary fills the slack between the size asked for and
// the object's end, which is up to a page less one byte: at 64 KiB pages
// almost 64 KiB of it.
TEST(PageSize, TheGuardsCanaryFillsASlackOfUpToAPage) {
  constexpr uint64_t kKey = 0x9e3779b97f4a7c15ull;
  for (size_t page : kPages) {
    const size_t bytes = 2 * page;
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* c = static_cast<unsigned char*>(mem);
    uintptr_t base = reinterpret_cast<uintptr_t>(mem);
    for (size_t size : {page + 1, page + 7, page + 4000, 2 * page - 9, 2 * page - 1}) {
      memset(mem, 0xaa, bytes);
      size_t end = large::usable_for(size, page);
      ASSERT_EQ(end, bytes);
      large_guard::fill_slack(base, size, end, kKey);
      EXPECT_EQ(large_guard::first_overwritten(base, size, end, kKey), 0u) << page << " " << size;
      for (size_t i = 0; i < size; i++) ASSERT_EQ(c[i], 0xaa) << page << " " << size << " " << i;
      // The last byte of the slack, overwritten, is the one reported.
      c[end - 1] ^= 0xff;
      EXPECT_EQ(large_guard::first_overwritten(base, size, end, kKey), base + end - 1);
    }
    munmap(mem, bytes);
  }
}

// At the page this process has: a range that does not start on a page is
// refused (as the kernel refuses it; an emulator reporting a bigger page
// than it enforces would take it), and a range's last page is acted on
// whole (as the kernel rounds the length up; qemu-user ignores such an
// MADV_DONTNEED when it reports a bigger page).
TEST(PageSize, ThePlatformTakesRangesFromAPageAndActsOnTheirWholePages) {
  const size_t page = os::page_size();
  ASSERT_TRUE(config::page_size_supported(page));
  auto* p = static_cast<unsigned char*>(os::reserve_aligned(4 * page, page));
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(on_page(reinterpret_cast<uintptr_t>(p), page));
  memset(p, 0x5c, 4 * page);
  EXPECT_FALSE(os::purge(p + page / 2, page, true));
  EXPECT_FALSE(os::make_inaccessible(p + page / 2, page));
  EXPECT_FALSE(os::release(p + page / 2, page));
  for (size_t i = 0; i < 4 * page; i++) ASSERT_EQ(p[i], 0x5c) << "changed by a refused call";
  // One byte's purge zeroes its whole page, and nothing past it.
  ASSERT_TRUE(os::purge(p + page, 1, true));
  for (size_t i = 0; i < page; i++) ASSERT_EQ(p[page + i], 0) << i;
  EXPECT_EQ(p[page - 1], 0x5c);
  EXPECT_EQ(p[2 * page], 0x5c);
  // One byte made inaccessible: its whole page, exactly, is a mapping
  // without access (/proc/self/maps); made accessible again, it reads back.
  ASSERT_TRUE(os::make_inaccessible(p + 2 * page, 1));
  EXPECT_EQ(protection_of(p + 2 * page), "---p");
  EXPECT_EQ(protection_of(p + 3 * page - 1), "---p");
  EXPECT_EQ(protection_of(p + 2 * page - 1).substr(0, 2), "rw");
  EXPECT_EQ(protection_of(p + 3 * page).substr(0, 2), "rw");
  ASSERT_TRUE(os::make_accessible(p + 2 * page, 1));
  EXPECT_EQ(p[3 * page - 1], 0x5c);
  unsigned char vec[4] = {};
  // One byte released: its whole page (the last) goes, the rest stays.
  ASSERT_TRUE(os::release(p + 3 * page, 1));
  EXPECT_NE(mincore(p + 3 * page, page, vec), 0) << "the last page is still mapped";
  EXPECT_EQ(p[2 * page], 0x5c);
  ASSERT_TRUE(os::release(p, 3 * page));
}
