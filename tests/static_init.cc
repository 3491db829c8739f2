// A global object whose constructor allocates before main, and whose
// destructor allocates and frees during exit, after main has returned.
// Linked with libroost.a this is malloc before roost has initialised itself;
// preloaded, it is malloc from a static constructor of the program.
#include "static_init.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "support.h"

namespace roost_test {
namespace {

EarlyAllocations g_report;

// Written to stderr and the process exits 5: ctest then sees a failure even
// though every gtest test has passed.
void exit_check(bool ok, const char* what) {
  if (ok) return;
  const char prefix[] = "static destructor check failed: ";
  (void)!write(2, prefix, sizeof(prefix) - 1);
  (void)!write(2, what, strlen(what));
  (void)!write(2, "\n", 1);
  _exit(5);
}

struct EarlyAllocator {
  void* kept_for_exit = nullptr;  // allocated before main, freed after it

  EarlyAllocator() {
    g_report.constructed = true;
    g_report.block_size = 1000;
    g_report.block = malloc(g_report.block_size);
    if (g_report.block != nullptr) {
      fill_pattern(g_report.block, g_report.block_size, kEarlyBlockId);
      g_report.usable_size = malloc_usable_size(g_report.block);
    }
    void* z = calloc(100, 100);
    g_report.calloc_was_zero = z != nullptr && find_nonzero(z, 10000) == SIZE_MAX;
    free(z);
    void* r = malloc(10);
    if (r != nullptr) {
      memcpy(r, "early bird", 10);
      r = realloc(r, 100000);
      g_report.realloc_kept_content = r != nullptr && memcmp(r, "early bird", 10) == 0;
      free(r);
    }
    void* a = aligned_alloc(4096, 5000);
    g_report.aligned_alloc_aligned = a != nullptr && is_aligned(a, 4096);
    free(a);
    g_report.text = new std::string(500, 'e');
    kept_for_exit = malloc(333);
    if (kept_for_exit != nullptr) fill_pattern(kept_for_exit, 333, 333);
  }

  ~EarlyAllocator() {
    // Late calls: during exit, after main has returned.
    exit_check(kept_for_exit != nullptr && check_pattern(kept_for_exit, 333, 333),
               "block allocated before main damaged at exit");
    free(kept_for_exit);
    std::vector<void*> v;
    for (size_t n = 1; n < 200000; n = n * 3 + 1) {
      void* p = malloc(n);
      exit_check(p != nullptr, "malloc failed during exit");
      memset(p, 0x77, n);
      v.push_back(p);
    }
    for (void* p : v) free(p);
    auto* s = new std::string(1000, 'x');
    exit_check(s->size() == 1000, "new std::string during exit");
    delete s;
  }
};

EarlyAllocator g_early_allocator;

}  // namespace

const EarlyAllocations& early_allocations() { return g_report; }

}  // namespace roost_test
