// frontend/message_passing.cc — frees between allocators.
//
// Owns: filing another allocator's objects (through the BatchIt cache, or
// one by one when it is off) in the outbox, posting the outbox (with
// home-bucket forwarding rounds), taking messages from the inbox (bounded
// per visit; each message is a batch of one slab, spliced home in constant
// time or forwarded whole), and settling both at thread exit and trim.
// Must never: touch another allocator's slabs or outbox; post with anything
// but one exchange per bucket.
#include "backend/pagemap.h"
#include "ds/slab_batch.h"
#include "frontend/allocator.h"

namespace roost {

namespace {
Allocator* owner_of(QueueNode* node) {
  return static_cast<Allocator*>(pagemap::lookup(node)->owner);
}
}  // namespace

void Allocator::file_message(Allocator* dest, QueueNode* node, unsigned shift) {
  outbox_.add((dest->id_ >> shift) & Outbox::kMask, node);
}

void Allocator::post_batch(ChunkMeta* m, FreeObject* head, FreeObject* tail, uint32_t count) {
  file_message(static_cast<Allocator*>(m->owner), slab_batch::seal(head, tail, count), 0);
  slab_batches_sent_++;
}

void Allocator::free_remote_slow(ChunkMeta* m, void* p) {
  // free_remote() counted the free, and its shortcut missed (as it always
  // does with BatchIt off: the cache stays empty).
  auto* o = static_cast<FreeObject*>(p);
  RemoteCache::Entry evicted;
  if (!config::kBatchIt || !batchit_) {
    post_batch(m, o, o, 1);
  } else if (remote_cache_.add_past_last(m, p, &evicted)) {
    post_batch(evicted.slab, evicted.head, evicted.tail, evicted.count);
    batchit_evictions_++;
  }
  charge_outbox(m->obj_size);
}

void Allocator::post_and_visit() {
  flush_outbox();
  if (inbox_.maybe_nonempty()) drain_inbox(false);
}

void Allocator::send_alone(ChunkMeta* m, void* p) {
  auto* o = static_cast<FreeObject*>(p);
  QueueNode* node = slab_batch::seal(o, o, 1);
  static_cast<Allocator*>(m->owner)->inbox_.enqueue(node, node);
}

void Allocator::flush_outbox() {
  if constexpr (config::kBatchIt) {
    remote_cache_.flush(
        [this](const RemoteCache::Entry& e) { post_batch(e.slab, e.head, e.tail, e.count); });
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
      owner_of(batch.head)->inbox_.enqueue(batch.head, batch.tail);
      batches_sent_++;
    });
    if (outbox_.empty(home)) break;
    QueueNode* list = outbox_.take(home).head;
    unsigned next_shift = shift + config::kBucketBits;
    while (list != nullptr) {
      QueueNode* next = list->next.load(std::memory_order_relaxed);
      file_message(owner_of(list), list, next_shift);
      list = next;
    }
  }
  outbox_.room = outbox_limit_;
}

void Allocator::drain_inbox(bool all) {
  uint64_t batches = 0;
  uint64_t received = 0;
  uint64_t forwarded = 0;
  uint64_t forwarded_batches = 0;
  draining_ = true;  // slab_event must not come back here
  for (;;) {
    if (!all && batches == config::kInboxBudget) break;
    QueueNode* node = inbox_.dequeue();
    if (node == nullptr) break;
    batches++;
    slab_batch::Batch b = slab_batch::open(node);
    received += b.count;
    ChunkMeta* m = pagemap::lookup(node);
    auto* owner = static_cast<Allocator*>(m->owner);
    if (owner == this) {
      return_batch_to_slab(m, b);
    } else {
      // Sent here because our id shares the owner's low bits: pass the
      // whole batch on.
      file_message(owner, node, 0);
      forwarded += b.count;
      forwarded_batches++;
    }
  }
  draining_ = false;
  if (batches == 0) return;
  inbox_drains_++;
  messages_received_ += received;
  slab_batches_received_ += batches;
  if (forwarded != 0) {
    messages_forwarded_ += forwarded;
    slab_batches_sent_ += forwarded_batches;
    // Forwarded messages go on at once (so they never count against the
    // outbox's room): the sender's flush already waited for a full outbox,
    // and this thread may not free anything for a while.
    flush_outbox();
  }
}

void Allocator::settle() {
  flush_outbox();
  while (inbox_.maybe_nonempty()) {
    uint64_t before = messages_received_;
    drain_inbox(true);
    if (messages_received_ == before) break;  // a producer is mid-enqueue
  }
}

}  // namespace roost
