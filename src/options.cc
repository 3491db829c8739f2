// options.cc — the option table and its values.
#include "options.h"

#include "config.h"
#include "platform/env.h"
#include "platform/error.h"

namespace roost::options {

const Option kTable[kCount] = {
    {"ROOST_STATS", 0, "print statistics to stderr at exit"},
    {"ROOST_SLAB_RESERVE", config::kSlabReserveBytes,
     "resident bytes of empty slabs kept per allocator"},
    {"ROOST_PURGE_DONTNEED", 1, "purge with MADV_DONTNEED (1) or MADV_FREE (0)"},
    {"ROOST_OUTBOX_BYTES", config::kOutboxBytes, "remote-free bytes collected before posting"},
    {"ROOST_PURGE_DELAY", config::kPurgeDelayMs,
     "milliseconds released memory stays resident before it is purged"},
    {"ROOST_BATCHIT", config::kBatchIt ? 1u : 0u,
     "collect remote frees per slab and send each slab's as one batch (BatchIt)"},
};

namespace {
uint64_t g_values[kCount];
bool g_loaded = false;
}  // namespace

void load() {
  if (__atomic_load_n(&g_loaded, __ATOMIC_ACQUIRE)) return;
  for (unsigned i = 0; i < kCount; i++)
    __atomic_store_n(&g_values[i], env::get_u64(kTable[i].env, kTable[i].fallback),
                     __ATOMIC_RELAXED);
  if (g_values[kStats] != 0) err::keep_stderr();  // for the report at exit
  __atomic_store_n(&g_loaded, true, __ATOMIC_RELEASE);
}

uint64_t get(Id id) {
  if (!__atomic_load_n(&g_loaded, __ATOMIC_ACQUIRE)) return kTable[id].fallback;
  return __atomic_load_n(&g_values[id], __ATOMIC_RELAXED);
}

void set(Id id, uint64_t value) {
  load();  // the environment first, so that it cannot undo this later
  __atomic_store_n(&g_values[id], value, __ATOMIC_RELAXED);
}

}  // namespace roost::options
