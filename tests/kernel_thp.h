// tests/kernel_thp.h — the kernel's own view of transparent huge pages, for
// tests: its THP mode and one mapping's fields in /proc/self/smaps.  Read
// here rather than through roost's os layer: were that wrong, the tests
// that use these would skip or pass instead of failing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace roost_test {

// The THP mode in force ("always", "madvise" or "never"; "" where the
// kernel has no THP).
inline std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  size_t open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos
             ? ""
             : line.substr(open + 1, close - open - 1);
}

// Calls field(line) for each field line ("Name: value") of the smaps
// record of the mapping that holds `addr`; false if no mapping holds it.
template <typename Field>
bool for_each_smaps_field(uintptr_t addr, Field&& field) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool inside = false, found = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = addr >= lo && addr < hi;
      found |= inside;
      continue;
    }
    if (inside) field(line);
  }
  return found;
}

}  // namespace roost_test
