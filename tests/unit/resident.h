// tests/unit/resident.h — how much of a range the kernel holds resident
// (mincore), for tests of what roost touches and gives back.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <vector>

#include "config.h"

namespace roost::test {

// Small pages (config::kMinPageSize) of [p, p + bytes) that are resident,
// counted in the kernel's own pages; -1 if part of the range is not
// mapped, -2 on any other error.  `p` starts a page.
inline long resident_small_pages(const void* p, size_t bytes) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((bytes + page - 1) / page);
  if (mincore(const_cast<void*>(p), bytes, vec.data()) != 0) return errno == ENOMEM ? -1 : -2;
  long n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n * static_cast<long>(page / config::kMinPageSize);
}

}  // namespace roost::test
