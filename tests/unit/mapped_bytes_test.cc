// What the kernel maps in roost's heap, as the statistics report reads it:
// os::mapped_bytes() (/proc/self/smaps read in pieces through a fixed
// buffer, Rss and AnonHugePages summed over the mappings that overlap some
// ranges) gives the figures an independent reader of the same file gives
// (std::ifstream, line by line), for one mapping, for none, and for every
// mapping of the process (the whole file: well past the buffer); and
// address_space::heap_mapped_bytes() counts a large object of 64 MiB,
// written whole, with the huge pages the kernel gave its inside (under
// ROOST_HUGEPAGES=1, which advises the blocks between a large object's
// first and last).  The huge-page parts are skipped where the kernel's THP
// mode is not `madvise`, or where it gave no huge page when asked.
#include "platform/os.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../kernel_thp.h"
#include "backend/address_space.h"
#include "backend/large.h"
#include "backend/pagemap.h"
#include "options.h"
#include "scoped_option.h"

using namespace roost;
using test::ScopedOption;

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kBlock = 2 * kMiB;

bool kernel_advice_mode() { return roost_test::thp_mode() == "madvise"; }

// The reference: Rss and AnonHugePages of the mappings that overlap any of
// `ranges`, read with the C++ library.
os::MappedBytes reference(const std::vector<os::AddressRange>& ranges) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool inside = false;
  os::MappedBytes sum = {0, 0};
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = false;
      for (const os::AddressRange& r : ranges) inside |= lo < r.end && r.begin < hi;
      continue;
    }
    unsigned long kib = 0;
    if (!inside) continue;
    if (std::sscanf(line.c_str(), "Rss: %lu kB", &kib) == 1) sum.resident += kib * 1024;
    if (std::sscanf(line.c_str(), "AnonHugePages: %lu kB", &kib) == 1) sum.huge += kib * 1024;
  }
  return sum;
}

// A private anonymous mapping of `size` bytes aligned to 2 MiB, unmapped
// at the end.
struct Mapping {
  explicit Mapping(size_t size) : size(size) {
    raw = mmap(nullptr, size + kBlock, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(raw, MAP_FAILED);
    base = (reinterpret_cast<uintptr_t>(raw) + kBlock - 1) & ~(kBlock - 1);
  }
  ~Mapping() { munmap(raw, size + kBlock); }
  os::AddressRange range() const { return {base, base + size}; }
  void* raw;
  size_t size;
  uintptr_t base;
};

}  // namespace

TEST(MappedBytes, OneMappingAsAnotherReaderSeesIt) {
  Mapping m(8 * kMiB);
  // Half of it written: 4 MiB resident (and huge pages where the kernel
  // gives them to the advised half).
  if (kernel_advice_mode()) madvise(reinterpret_cast<void*>(m.base), 4 * kMiB, MADV_HUGEPAGE);
  memset(reinterpret_cast<void*>(m.base), 1, 4 * kMiB);
  os::AddressRange r = m.range();
  os::MappedBytes got;
  ASSERT_TRUE(os::mapped_bytes(&r, 1, &got));
  os::MappedBytes want = reference({r});
  EXPECT_EQ(got.resident, want.resident);
  EXPECT_EQ(got.huge, want.huge);
  EXPECT_GE(got.resident, 4 * kMiB);
  EXPECT_LE(got.huge, got.resident);
  if (!kernel_advice_mode()) GTEST_SKIP() << "the kernel's THP mode is not `madvise`";
  if (got.huge == 0) GTEST_SKIP() << "the kernel gave the advised 4 MiB no huge page";
  EXPECT_EQ(got.huge % kBlock, 0u);
}

TEST(MappedBytes, NoRangeOrAnEmptyOneCountsNothing) {
  os::MappedBytes got = {1, 1};
  ASSERT_TRUE(os::mapped_bytes(nullptr, 0, &got));
  EXPECT_EQ(got.resident, 0u);
  EXPECT_EQ(got.huge, 0u);
  // The page at 0 is never mapped.
  os::AddressRange nothing = {0, 4096};
  ASSERT_TRUE(os::mapped_bytes(&nothing, 1, &got));
  EXPECT_EQ(got.resident, 0u);
}

TEST(MappedBytes, TheWholeFileAsAnotherReaderSeesIt) {
  // The reader walks every mapping of the process (smaps is many times its
  // buffer) and sums those it is asked for: three of the test's own, each
  // a mapping apart (MADV_DONTFORK: its flags differ from its neighbours',
  // so the kernel merges it with none of the allocators' mappings, whose
  // figures change as the readers themselves allocate).
  std::vector<Mapping*> mine = {new Mapping(2 * kMiB), new Mapping(6 * kMiB),
                                new Mapping(12 * kMiB)};
  std::vector<os::AddressRange> ranges;
  for (Mapping* m : mine) {
    ASSERT_EQ(madvise(m->raw, m->size + kBlock, MADV_DONTFORK), 0);
    memset(reinterpret_cast<void*>(m->base), 1, m->size / 2);
    ranges.push_back(m->range());
  }
  os::MappedBytes got;
  ASSERT_TRUE(os::mapped_bytes(ranges.data(), ranges.size(), &got));
  os::MappedBytes want = reference(ranges);
  EXPECT_EQ(got.resident, want.resident);
  EXPECT_EQ(got.huge, want.huge);
  EXPECT_GE(got.resident, 10 * kMiB);
  std::ifstream f("/proc/self/smaps");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_GT(text.size(), size_t{16384}) << "smaps is small here: the pieces are not tested";
  for (Mapping* m : mine) delete m;
}

TEST(MappedBytes, TheHeapCountsALargeObjectsHugePages) {
  ASSERT_TRUE(pagemap::init());
  // (The test has the kernel collapse the object itself, whatever the
  // policy would do; MADV_COLLAPSE leaves the mapping's flags as they are.
  // Nothing released is purged behind the test's back.)
  ScopedOption delay(options::kPurgeDelayMs, 3600 * 1000);
  ScopedOption off(options::kHugePages, options::kHugeOff);
  os::MappedBytes before;
  ASSERT_TRUE(address_space::heap_mapped_bytes(&before));
  size_t dirty = 0;
  void* p = large::alloc(64 * kMiB, 4096, &dirty);
  ASSERT_NE(p, nullptr);
  memset(p, 7, 64 * kMiB);
  constexpr int kCollapse = 25;  // MADV_COLLAPSE (Linux 6.1)
  // (EAGAIN when some block could not be had: the others are collapsed.)
  bool collapsed = madvise(p, 64 * kMiB, kCollapse) == 0 || errno == EAGAIN;
  os::MappedBytes after;
  ASSERT_TRUE(address_space::heap_mapped_bytes(&after));
  // The heap's ranges hold the object: all of it is resident now.
  os::AddressRange object = {reinterpret_cast<uintptr_t>(p),
                             reinterpret_cast<uintptr_t>(p) + 64 * kMiB};
  os::AddressRange found[64];
  size_t n = address_space::ranges(found, 64);
  bool held = false;
  for (size_t i = 0; i < n; i++)
    held |= found[i].begin <= object.begin && object.end <= found[i].end;
  EXPECT_TRUE(held) << "no range of roost's holds the object";
  EXPECT_GE(after.resident, 64 * kMiB);
  EXPECT_LE(after.huge, after.resident);
  // The huge pages the kernel gave the object's mapping are the heap's.
  os::MappedBytes mine = reference({object});
  EXPECT_GE(after.huge, mine.huge);
  large::free(pagemap::lookup(p));
  if (!collapsed) GTEST_SKIP() << "the kernel has no MADV_COLLAPSE";
  // At least 31 whole blocks of it lie inside its 64 MiB, wherever it
  // starts: at least half of them collapsed.
  constexpr size_t kInside = 31 * kBlock;
  if (mine.huge < kInside / 2)
    GTEST_SKIP() << "the kernel gave the object only " << mine.huge / kMiB
                 << " MiB of huge pages (none to spare?)";
  EXPECT_GE(after.huge - before.huge, kInside / 2);
}
