// api/stats.cc — roost_stats(), roost_print_stats() and ROOST_STATS=1.
//
// Owns: summing the counters of every allocator and of the backend.  Must
// never: stop other threads or allocate; counters of running threads are
// read as they are.
#include "api/api.h"
#include "backend/chunk_allocator.h"
#include "backend/large.h"
#include "backend/meta_arena.h"
#include "options.h"
#include "platform/error.h"
#include "roost.h"

using namespace roost;

ROOST_EXPORT int roost_stats(struct roost_stats* out) {
  if (out == nullptr) return -1;
  *out = {};
  uint64_t allocs = 0, frees = 0, slabs = 0;
  int64_t small_bytes = 0;
  uint64_t per_class_allocs[sizeclass::kCount] = {};
  uint64_t per_class_frees[sizeclass::kCount] = {};
  auto read = [](const uint64_t& counter) { return __atomic_load_n(&counter, __ATOMIC_RELAXED); };
  pool::for_each([&](const Allocator& a) {
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      per_class_allocs[sc] += read(a.allocs_[sc]);
      per_class_frees[sc] += read(a.frees_[sc]);
    }
    slabs += read(a.slabs_);
    out->remote_frees += read(a.remote_frees_);
    // Every object a thread frees remotely or forwards is sent.
    out->messages_sent += read(a.remote_frees_) + read(a.messages_forwarded_);
    out->batches_sent += read(a.batches_sent_);
    out->messages_received += read(a.messages_received_);
    out->messages_forwarded += read(a.messages_forwarded_);
    out->inbox_drains += read(a.inbox_drains_);
    out->slab_batches_sent += read(a.slab_batches_sent_);
    out->slab_batches_received += read(a.slab_batches_received_);
    out->batchit_evictions += read(a.batchit_evictions_);
  });
  uint64_t alone = heap::unbound_sends();
  out->remote_frees += alone;
  out->messages_sent += alone;
  out->batches_sent += alone;
  out->slab_batches_sent += alone;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    per_class_frees[sc] += heap::unbound_frees(sc);
    allocs += per_class_allocs[sc];
    frees += per_class_frees[sc];
    small_bytes += static_cast<int64_t>(per_class_allocs[sc] - per_class_frees[sc]) *
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
  out->slabs = slabs;
  out->chunks = chunks::chunks_out();
  out->allocators = pool::allocators_created();
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
      {"allocations", s.allocations},
      {"frees", s.frees},
      {"large_allocations", s.large_allocations},
      {"bytes_in_use", s.bytes_in_use},
      {"bytes_committed", s.bytes_committed},
      {"bytes_reserved", s.bytes_reserved},
      {"slabs", s.slabs},
      {"chunks", s.chunks},
      {"allocators", s.allocators},
      {"remote_frees", s.remote_frees},
      {"messages_sent", s.messages_sent},
      {"batches_sent", s.batches_sent},
      {"messages_received", s.messages_received},
      {"messages_forwarded", s.messages_forwarded},
      {"inbox_drains", s.inbox_drains},
      {"slab_batches_sent", s.slab_batches_sent},
      {"slab_batches_received", s.slab_batches_received},
      {"batchit_evictions", s.batchit_evictions},
      {"bytes_dirty", s.bytes_dirty},
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
