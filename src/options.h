// options.h — every run-time option of roost, in one table.
//
// Owns: the option table (environment name, default, meaning) and the
// values in force.  Read once, at the first allocation, from ROOST_*
// environment variables without allocating.  Must never: be changed on a
// fast path or consulted on one.
#pragma once

#include <cstdint>

namespace roost::options {

enum Id : unsigned {
  kStats,             // ROOST_STATS: print counters to stderr at exit
  kSlabReserveBytes,  // ROOST_SLAB_RESERVE: empty-slab bytes an allocator keeps
  kPurgeZero,         // ROOST_PURGE_DONTNEED: 1 = MADV_DONTNEED, 0 = MADV_FREE
  kOutboxBytes,       // ROOST_OUTBOX_BYTES: remote-free bytes collected before a flush
  kPurgeDelayMs,      // ROOST_PURGE_DELAY: milliseconds released memory stays before purging
  kBatchIt,           // ROOST_BATCHIT: collect remote frees per slab (1) or not (0)
  kCount
};

struct Option {
  const char* env;
  uint64_t fallback;
  const char* help;
};

extern const Option kTable[kCount];

// Reads the environment; later calls do nothing.
void load();

uint64_t get(Id id);
// Overrides one value (reads the environment first if it was not read yet).
void set(Id id, uint64_t value);

}  // namespace roost::options
