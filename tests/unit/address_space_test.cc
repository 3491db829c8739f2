// The address space: regions aligned to their size and covered by the
// pagemap, huge ranges placed in free slots and reused once given back, the
// pagemap growing in place (where roost places memory itself) from a place
// drawn at random per process, and regions shrinking under an
// address-space limit until it leaves no room.
#include "backend/address_space.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "backend/pagemap.h"
#include "config.h"
#include "platform/os.h"

using namespace roost;

namespace {

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Is [p, p + size) inside what the pagemap covers?
bool covered(const void* p, size_t size) {
  return ((addr(p) + size - 1) >> config::kGranuleBits) < pagemap::g_limit;
}

// Runs `body` in a child process; its exit status is the test's verdict
// (0: passed), so that a limit set there binds only the child.
template <typename Body>
void in_child(Body body) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(body());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died, status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child check number " << WEXITSTATUS(status) << " failed";
}

}  // namespace

TEST(AddressSpace, RegionsAreAlignedToTheirSizeAndCovered) {
  ASSERT_TRUE(pagemap::init());
  for (unsigned min_order : {16u, 20u, 30u}) {
    unsigned order = 0;
    void* p = address_space::reserve_region(min_order, &order);
    ASSERT_NE(p, nullptr);
    EXPECT_GE(order, min_order);
    EXPECT_LE(order, config::kRegionBits);
    EXPECT_EQ(addr(p) & ((size_t{1} << order) - 1), 0u);
    EXPECT_TRUE(covered(p, size_t{1} << order));
    if (pagemap::grows()) {
      EXPECT_GE(addr(p), config::kWindowBase);
      EXPECT_LT(addr(p), config::kPagemapBase);
    }
    // Reads as zero, and is writable at both ends.
    auto* c = static_cast<volatile char*>(p);
    EXPECT_EQ(c[0], 0);
    c[0] = 1;
    c[(size_t{1} << order) - 1] = 1;
    address_space::release_region(p, order);
  }
}

TEST(AddressSpace, AHugeRangeIsReusedOnceGivenBack) {
  ASSERT_TRUE(pagemap::init());
  const size_t size = config::kRegion + (size_t{5} << 20);
  void* p = address_space::reserve_huge(size, config::kGranule);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(covered(p, size));
  static_cast<volatile char*>(p)[size - 1] = 1;
  void* q = address_space::reserve_huge(size, config::kGranule);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(addr(q) >= addr(p) + size || addr(q) + size <= addr(p)) << "overlap";
  ASSERT_TRUE(address_space::release_huge(p, size));
  if (pagemap::grows()) {
    // First fit: the slots given back serve the next range of that size.
    void* again = address_space::reserve_huge(size, config::kGranule);
    EXPECT_EQ(again, p);
    ASSERT_TRUE(address_space::release_huge(again, size));
  }
  // A shrink gives the tail back; the rest stays usable.
  ASSERT_TRUE(address_space::shrink_huge(q, size, size_t{1} << 20));
  static_cast<volatile char*>(q)[(size_t{1} << 20) - 1] = 2;
  ASSERT_TRUE(address_space::release_huge(q, size_t{1} << 20));
}

TEST(AddressSpace, AlignmentsBeyondASlotAreHonoured) {
  ASSERT_TRUE(pagemap::init());
  const size_t align = size_t{4} << 30;
  void* p = address_space::reserve_huge(size_t{2} << 30, align);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(addr(p) % align, 0u);
  EXPECT_TRUE(covered(p, size_t{2} << 30));
  ASSERT_TRUE(address_space::release_huge(p, size_t{2} << 30));
}

// Where roost places memory itself the pagemap starts small (its address
// space in proportion to what roost holds) and grows as the window does.
TEST(AddressSpace, ThePagemapGrowsWithTheWindow) {
  ASSERT_TRUE(pagemap::init());
  if (!pagemap::grows()) GTEST_SKIP() << "the kernel places memory here (sanitizer build)";
  size_t before = pagemap::reserved_bytes();
  EXPECT_LE(before, size_t{64} << 20);
  // Four slots' worth of huge ranges push the window (and the map) up.
  void* p = address_space::reserve_huge(size_t{4} << 30, config::kGranule);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(covered(p, size_t{4} << 30));
  EXPECT_GE(pagemap::reserved_bytes(), before);
  // Addresses beyond the map, anywhere in the 47-bit space, are not ours.
  int local = 0;
  EXPECT_EQ(pagemap::lookup(&local), nullptr);
  EXPECT_EQ(pagemap::lookup(reinterpret_cast<void*>(config::kPagemapBase - 16)), nullptr);
  ASSERT_TRUE(address_space::release_huge(p, size_t{4} << 30));
}

// Under `ulimit -v` a region is at most a sixteenth of the limit, and when
// the OS refuses, roost asks for less, down to what the request needs.
TEST(AddressSpace, RegionsShrinkUnderAnAddressSpaceLimit) {
  ASSERT_TRUE(pagemap::init());
  in_child([] {
    // Not a multiple of any region size, so the last regions must be smaller.
    const size_t headroom = (size_t{96} << 20) + (size_t{3} << 19);
    const size_t limit = os::address_space_used() + headroom;
    rlimit r{limit, limit};
    if (setrlimit(RLIMIT_AS, &r) != 0) return 1;
    unsigned order = 0;
    void* p = address_space::reserve_region(16, &order);
    if (p == nullptr) return 2;
    if ((size_t{1} << order) > limit / config::kRegionLimitShare) return 3;
    // Take regions until even 64 KiB is refused: the last ones get smaller
    // than the first, and what was taken fills most of the headroom.
    size_t total = size_t{1} << order;
    unsigned smallest = order;
    for (int i = 0; i < 100000; i++) {
      unsigned o = 0;
      void* q = address_space::reserve_region(16, &o);
      if (q == nullptr) break;
      if (addr(q) & ((size_t{1} << o) - 1)) return 4;
      total += size_t{1} << o;
      if (o < smallest) smallest = o;
    }
    if (smallest >= order) return 5;
    if (total < headroom / 2) return 6;
    // A request of a size that cannot fit is refused, not crashed on.
    unsigned o = 0;
    if (address_space::reserve_region(config::kRegionBits, &o) != nullptr) return 7;
    return 0;
  });
}

// The window's first slot and the pagemap's place are drawn per process:
// heap addresses are not the same from run to run.
TEST(AddressSpace, TheLayoutDiffersFromProcessToProcess) {
  ASSERT_TRUE(pagemap::init());
  if (!pagemap::grows()) GTEST_SKIP() << "the kernel places memory here (sanitizer build)";
  // Children start from a fresh exec: this binary with a filter that runs
  // nothing but prints the layout.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<std::pair<uintptr_t, uintptr_t>> seen;
  for (int i = 0; i < 8; i++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      dup2(fds[1], 1);
      execl("/proc/self/exe", "address_space_probe", "--gtest_filter=AddressSpaceProbe.*",
            "--gtest_also_run_disabled_tests", nullptr);
      _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  char line[256];
  while (fgets(line, sizeof line, in) != nullptr) {
    unsigned long long w = 0, t = 0;
    if (sscanf(line, "layout %llx %llx", &w, &t) == 2) seen.emplace_back(w, t);
  }
  fclose(in);
  ASSERT_EQ(seen.size(), 8u);
  size_t distinct_windows = 0, distinct_tables = 0;
  for (size_t i = 0; i < seen.size(); i++) {
    bool new_window = true, new_table = true;
    for (size_t j = 0; j < i; j++) {
      new_window &= seen[j].first != seen[i].first;
      new_table &= seen[j].second != seen[i].second;
    }
    distinct_windows += new_window;
    distinct_tables += new_table;
    EXPECT_GE(seen[i].first, config::kWindowBase);
    EXPECT_EQ(seen[i].first % config::kRegion, 0u);
    EXPECT_GE(seen[i].second, config::kPagemapBase);
  }
  EXPECT_GE(distinct_windows, 2u);
  EXPECT_GE(distinct_tables, 2u);
}

// Run by the test above in a child: prints where this process's window and
// pagemap are.
TEST(AddressSpaceProbe, DISABLED_PrintLayout) {
  ASSERT_TRUE(pagemap::init());
  printf("layout %llx %llx\n", static_cast<unsigned long long>(pagemap::window_start()),
         static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pagemap::g_entries)));
  fflush(stdout);
}
