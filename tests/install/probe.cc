// tests/install/probe.cc — the C++ consumer of an installed roost, built
// by tests/install/CMakeLists.txt through find_package(roost): as
// probe_roost (roost::roost, operator new and malloc overridden) and
// probe_prefixed (roost::prefixed, roost_malloc only).  Exits 0 when
// roost's counters moved by what it allocated.
#include <cstdio>
#include <memory>
#include <vector>

#include "roost.h"

int main() {
  if (roost_version() != ROOST_VERSION) return 1;
  struct roost_stats before {
  }, after{};
  roost_stats(&before);
  std::vector<std::unique_ptr<char[]>> kept;
#ifdef PROBE_PREFIXED
  std::vector<void*> raw;
  for (int i = 0; i < 1000; i++) raw.push_back(roost_malloc(100));
#else
  for (int i = 0; i < 1000; i++) kept.emplace_back(new char[100]());
#endif
  roost_stats(&after);
#ifdef PROBE_PREFIXED
  for (void* p : raw) roost_free(p);
#endif
  unsigned long long counted = after.allocations - before.allocations;
  if (counted < 1000) {
    std::printf("roost counted %llu allocations of 1000\n", counted);
    return 1;
  }
  std::printf("roost: %llu allocations counted\n", counted);
  return 0;
}
