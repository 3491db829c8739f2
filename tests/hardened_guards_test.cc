// The hardened build's guard pages between slabs and its quarantine of
// freed large objects, through roost's statistics and its backend's
// functions (linked to libroost-hardened.a, compiled with its settings).
//
// Owns: the checks that the slab guards stay within their cap (and the
// kernel mappings with them), that a warm slab start/retire loop makes no
// mprotect call, and that the large-object quarantine holds what
// config.h says.  Must never: depend on timing (the purge delay is set to
// a day by the ctest entry, so that no purge runs between the counts), or
// run in another build (it is compiled with ROOST_HARDENED=1).
#include <malloc.h>
#include <roost.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>
#include "backend/chunk_allocator.h"
#include "config.h"

static_assert(roost::config::kGuardSlabs && roost::config::kQuarantineLarge,
              "compiled with the hardened build's settings");

namespace {

using namespace roost;

struct roost_stats stats() {
  struct roost_stats s {};
  ::roost_stats(&s);
  return s;
}

// Kernel mappings of this process.
size_t mappings() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == nullptr) return 0;
  size_t lines = 0;
  for (int c; (c = fgetc(f)) != EOF;) lines += c == '\n';
  fclose(f);
  return lines;
}

// Allocates `bytes` of objects of each of three sizes whose slabs are one
// granule (64, 1000 and 4000 bytes asked for), touching each, then frees
// them all.
void slab_round(size_t bytes) {
  static std::vector<void*> objects;
  for (size_t size : {size_t{64}, size_t{1000}, size_t{4000}}) {
    objects.clear();
    for (size_t i = 0; i < bytes / size; i++) {
      auto* p = static_cast<char*>(malloc(size));
      ASSERT_NE(p, nullptr);
      p[0] = 1;
      objects.push_back(p);
    }
    for (void* p : objects) free(p);
  }
}

}  // namespace

// Once the backend holds enough released slab chunks (a round twice the
// size), rounds that start and retire some 800 slabs each (16 MiB of
// objects of each of three sizes, far beyond the allocator's chunk cache)
// reuse them with their guard pages in place: no mprotect call at all.
TEST(SlabGuards, AWarmSlabStartRetireLoopMakesNoMprotectCall) {
  slab_round(size_t{32} << 20);
  uint64_t before = stats().protect_calls;
  for (int round = 0; round < 20; round++) slab_round(size_t{16} << 20);
  EXPECT_EQ(stats().protect_calls - before, 0u);
  EXPECT_GT(stats().slab_guards, 0u);
}

// Guards placed on more chunks than the cap allows: the cap's worth are
// placed, the rest refused and counted, the kernel's mappings grow by two
// per guard at most, and lifting them all leaves none.
TEST(SlabGuards, StayWithinTheCap) {
  free(malloc(1));  // (roost started)
  constexpr size_t kCap = config::kMaxSlabGuards;
  size_t in_place = chunks::end_guards();
  size_t refused = chunks::end_guards_refused();
  size_t maps = mappings();
  std::vector<ChunkMeta*> taken;
  size_t placed = 0, had = 0;  // (a released slab chunk keeps its guard)
  for (size_t i = 0; i < kCap + 1000; i++) {
    ChunkMeta* m = chunks::alloc(chunks::kMinOrder);
    ASSERT_NE(m, nullptr);
    taken.push_back(m);
    had += chunks::has_end_guard(m);
    placed += chunks::place_end_guard(m);
  }
  EXPECT_EQ(placed - had, kCap - in_place);
  EXPECT_EQ(chunks::end_guards(), kCap);
  EXPECT_EQ(chunks::end_guards_refused() - refused, taken.size() - placed);
  EXPECT_LE(mappings(), maps + 2 * (placed - had) + 16);
  EXPECT_EQ(stats().slab_guards, kCap);
  for (ChunkMeta* m : taken) {
    EXPECT_TRUE(chunks::lift_end_guard(m));
    EXPECT_FALSE(chunks::has_end_guard(m));
    chunks::release(m, 0);
  }
  EXPECT_EQ(chunks::end_guards(), in_place - had);
}

// Freed large objects wait in the quarantine, 64 at most (of 200 KiB
// each: within its 16 MiB), and malloc_trim() empties it.
TEST(LargeQuarantine, HoldsItsCountAndMallocTrimEmptiesIt) {
  std::vector<void*> objects;
  for (int i = 0; i < 100; i++) objects.push_back(malloc(200 * 1024));
  for (void* p : objects) free(p);
  EXPECT_EQ(stats().large_quarantined, config::kLargeQuarantineObjects);
  malloc_trim(0);
  EXPECT_EQ(stats().large_quarantined, 0u);
}
