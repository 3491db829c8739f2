// What the global constructor in static_init.cc saw when it allocated
// before main (and before roost's own initialisation when roost is linked
// statically).  Checked by api_lifecycle_test.cc.
#pragma once

#include <cstddef>
#include <string>

namespace roost_test {

struct EarlyAllocations {
  bool constructed = false;
  void* block = nullptr;  // malloc'd, filled with pattern id kEarlyBlockId
  size_t block_size = 0;
  bool calloc_was_zero = false;
  bool realloc_kept_content = false;
  bool aligned_alloc_aligned = false;
  std::string* text = nullptr;  // new'd std::string, freed by the test
  size_t usable_size = 0;       // malloc_usable_size(block)
};

inline constexpr unsigned long long kEarlyBlockId = 4242;

const EarlyAllocations& early_allocations();

}  // namespace roost_test
