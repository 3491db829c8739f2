// frontend/messenger.cc — implementation of frontend/messenger.h.
#include "frontend/messenger.h"

#include "ds/counter.h"
#include "frontend/allocator.h"
#include "options.h"

namespace roost {

namespace {

// Frees by threads without an allocator, each posted alone: any thread
// adds to these.
MessageCounters g_alone;

std::atomic<void (*)()> g_parked_mail_hook{nullptr};

}  // namespace

void Messenger::set_parked_mail_hook(void (*hook)()) {
  g_parked_mail_hook.store(hook, std::memory_order_relaxed);
}

void Messenger::deliver(Messenger* dest, QueueNode* first, QueueNode* last) {
  dest->inbox_.enqueue(first, last);
  // Either the parker's fence (set_parked) comes first and this load sees
  // it parked, or the parker, after its fence, asks the service to look
  // (the pool does so for any allocator parked with slabs), and it finds
  // this message.
  full_fence();
  if (ROOST_UNLIKELY(dest->parked_.load(std::memory_order_relaxed)))
    if (void (*hook)() = g_parked_mail_hook.load(std::memory_order_relaxed)) hook();
}

void MessageCounters::add(const MessageCounters& from) {
#define ROOST_STAT(name, source, description) ROOST_MESSAGE_COUNTER_##source(name)
#define ROOST_MESSAGE_COUNTER_message(name) name += read_counter(from.name);
#define ROOST_MESSAGE_COUNTER_derived(name)
#include "roost_stats.def"
#undef ROOST_STAT
#undef ROOST_MESSAGE_COUNTER_message
#undef ROOST_MESSAGE_COUNTER_derived
}

void Messenger::load_options() {
  outbox_limit_ = options::get(options::kOutboxBytes);
  outbox_.reset_room(outbox_limit_);
  batchit_ = options::get(options::kBatchIt) != 0;
}

void Messenger::post() {
  if constexpr (config::kBatchIt) {
    remote_cache_.flush(
        [this](const RemoteCache::Entry& e) { file_batch(e.slab, e.head, e.tail, e.count); });
  }
  // Round r sends every bucket but the home one (this allocator's id bits
  // at the round's shift) to the owner of its first object; the home
  // bucket's objects share those bits with us but belong to others, so they
  // are re-sorted by the next bits.  Ids differ somewhere, so this ends
  // within 32 / kBucketBits rounds.
  for (unsigned shift = 0;; shift += config::kBucketBits) {
    unsigned home = (id_ >> shift) & Outbox::kMask;
    outbox_.for_each_filled([&](unsigned b) {
      if (b == home) return;
      Outbox::Bucket batch = outbox_.take(b);
      deliver(owner_of(batch.head), batch.head, batch.tail);
      bump_counter(counters_.batches_sent);
    });
    if (outbox_.empty(home)) break;
    QueueNode* list = outbox_.take(home).head;
    unsigned next_shift = shift + config::kBucketBits;
    while (list != nullptr) {
      QueueNode* next = list->next.load(std::memory_order_relaxed);
      file(owner_of(list), list, next_shift);
      list = next;
    }
  }
  outbox_.reset_room(outbox_limit_);
}

void Messenger::note_received(uint64_t batches, uint64_t objects, uint64_t forwarded,
                              uint64_t forwarded_batches) {
  bump_counter(counters_.inbox_drains);
  bump_counter(counters_.messages_received, objects);
  bump_counter(counters_.slab_batches_received, batches);
  if (forwarded == 0) return;
  bump_counter(counters_.messages_forwarded, forwarded);
  bump_counter(counters_.slab_batches_sent, forwarded_batches);
  // Forwarded messages go on at once (so they never count against the
  // outbox's room): the sender's post already waited for a full outbox, and
  // this thread may not free anything for a while.
  post();
}

void Messenger::send_alone(ChunkMeta* m, void* p) {
  auto* o = static_cast<FreeObject*>(p);
  QueueNode* node = slab_batch::seal(o, o, 1);
  deliver(owner_of(m), node, node);
  add_shared_counter(g_alone.remote_frees, 1);
  add_shared_counter(g_alone.batches_sent, 1);
  add_shared_counter(g_alone.slab_batches_sent, 1);
}

const MessageCounters& Messenger::alone_counters() { return g_alone; }

}  // namespace roost
