// tests/unit/resident.h — how much of a range the kernel holds resident
// (mincore), for tests of what roost touches and gives back.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <vector>

#include "config.h"
#include "platform/os.h"

namespace roost::test {

// Small pages (config::kMinPageSize) of [p, p + bytes) that are resident:
// mincore's entries that say so, each a page of the kernel's (exact where
// its page is the small one; an emulator's page size may differ from the
// host's that mincore counts in, so the vector has room for an entry per
// small page); -1 if part of the range is not mapped, -2 on any other
// error.  `p` starts a page.
inline long resident_small_pages(const void* p, size_t bytes) {
  std::vector<unsigned char> vec((bytes + config::kMinPageSize - 1) / config::kMinPageSize + 1);
  if (mincore(const_cast<void*>(p), bytes, vec.data()) != 0) return errno == ENOMEM ? -1 : -2;
  long n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n * static_cast<long>(static_cast<size_t>(sysconf(_SC_PAGESIZE)) / config::kMinPageSize);
}

// Is roost's page (os::page_size) the small one?  Tests that expect exact
// counts from resident_small_pages run only then.
inline bool small_os_pages() { return os::page_size() == config::kMinPageSize; }

}  // namespace roost::test
