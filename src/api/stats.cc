// api/stats.cc — roost_stats(), roost_print_stats() and ROOST_STATS=1.
//
// Owns: the figures of struct roost_stats (include/roost_stats.def): the
// message counters summed over every allocator, the others computed from
// the allocators' class counters and the backend.  Must never: stop other
// threads or allocate; counters of running threads are read as they are.
#include "api/api.h"
#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/meta_arena.h"
#include "ds/counter.h"
#include "options.h"
#include "platform/error.h"
#include "roost.h"

using namespace roost;

namespace {

// What roost_stats() gathers from the allocators.
struct AllocatorTotals {
  uint64_t allocs[sizeclass::kCount] = {};
  uint64_t frees[sizeclass::kCount] = {};
  uint64_t slabs = 0;
  MessageCounters messages;
};

AllocatorTotals sum_allocators() {
  AllocatorTotals t;
  pool::for_each([&t](const Allocator& a) {
    const ClassCounters& c = a.class_counters();
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      t.allocs[sc] += read_counter(c.allocs[sc]);
      t.frees[sc] += read_counter(c.frees[sc]);
    }
    t.slabs += a.slab_count();
    t.messages.add(a.message_counters());
  });
  // Frees by threads past their exit hook: counted apart.
  t.messages.add(Messenger::alone_counters());
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) t.frees[sc] += heap::unbound_frees(sc);
  return t;
}

}  // namespace

ROOST_EXPORT int roost_stats(struct roost_stats* out) {
  if (out == nullptr) return -1;
  *out = {};
  AllocatorTotals t = sum_allocators();
#define ROOST_STAT(name, source, description) ROOST_STAT_FROM_##source(name)
#define ROOST_STAT_FROM_message(name) out->name = t.messages.name;
#define ROOST_STAT_FROM_derived(name)
#include "roost_stats.def"
#undef ROOST_STAT
#undef ROOST_STAT_FROM_message
#undef ROOST_STAT_FROM_derived
  uint64_t allocs = 0, frees = 0;
  int64_t small_bytes = 0;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    allocs += t.allocs[sc];
    frees += t.frees[sc];
    small_bytes += static_cast<int64_t>(t.allocs[sc] - t.frees[sc]) *
                   static_cast<int64_t>(sizeclass::kInfo.info[sc].size);
  }
  large::Counters lc = large::counters();
  out->bytes_in_use = static_cast<uint64_t>(small_bytes) + lc.bytes_in_use;
  out->bytes_dirty = chunks::dirty_bytes();
  out->bytes_committed = chunks::bytes_out() + out->bytes_dirty;
  out->bytes_reserved = chunks::reserved_bytes() + meta_arena::reserved_bytes();
  out->allocations = allocs + lc.allocations;
  out->frees = frees + lc.frees;
  out->large_allocations = lc.allocations;
  out->slabs = t.slabs;
  out->chunks = chunks::chunks_out();
  out->allocators = pool::allocators_created();
  // Every object a thread frees remotely or forwards is sent.
  out->messages_sent = out->remote_frees + out->messages_forwarded;
  return 0;
}

namespace {
void print_stats(bool at_exit) {
  struct roost_stats s;
  roost_stats(&s);
  const struct {
    const char* name;
    uint64_t value;
  } rows[] = {
#define ROOST_STAT(name, source, description) {#name, s.name},
#include "roost_stats.def"
#undef ROOST_STAT
  };
  for (const auto& row : rows) {
    err::Line line;
    line.str("roost: ").str(row.name).str(" ").dec(row.value).str("\n");
    if (at_exit)
      line.emit_report();
    else
      line.emit();
  }
}
}  // namespace

ROOST_EXPORT void roost_print_stats(void) { print_stats(false); }

// ROOST_STATS=1: counters at exit.  A destructor, not a constructor: it has
// no effect unless the option is set.
__attribute__((destructor)) static void print_stats_at_exit() {
  if (options::get(options::kStats) != 0) print_stats(true);
}
