// frontend/message_passing.cc — frees between allocators.
//
// Owns: filing another allocator's objects in the outbox, posting the
// outbox (with home-bucket forwarding rounds), taking messages from the
// inbox (bounded per visit; objects owned elsewhere are forwarded), and
// settling both at thread exit and trim.  Must never: touch another
// allocator's slabs or outbox; post with anything but one exchange per
// bucket.
#include "backend/pagemap.h"
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

void Allocator::free_remote(ChunkMeta* m, void* p) {
  auto* node = reinterpret_cast<QueueNode*>(p);
  file_message(static_cast<Allocator*>(m->owner), node, 0);
  outbox_.bytes += m->obj_size;
  remote_frees_++;
  messages_sent_++;
  if (ROOST_UNLIKELY(outbox_.bytes >= outbox_limit_)) flush_outbox();
  // A thread that only frees others' objects still visits its own inbox.
  if (ROOST_UNLIKELY(--remote_frees_to_check_ == 0)) {
    remote_frees_to_check_ = config::kRemoteFreesPerInboxCheck;
    if (inbox_.maybe_nonempty()) drain_inbox(false);
  }
}

void Allocator::send_alone(ChunkMeta* m, void* p) {
  auto* node = reinterpret_cast<QueueNode*>(p);
  static_cast<Allocator*>(m->owner)->inbox_.enqueue(node, node);
}

void Allocator::flush_outbox() {
  // Round r sends every bucket but the home one (this allocator's id bits
  // at the round's shift) to the owner of its first object; the home
  // bucket's objects share those bits with us but belong to others, so they
  // are re-sorted by the next bits.  Ids differ somewhere, so this ends
  // within 32 / kBucketBits rounds.
  for (unsigned shift = 0;; shift += config::kBucketBits) {
    unsigned home = (id_ >> shift) & Outbox::kMask;
    for (unsigned b = 0; b < Outbox::kBuckets; b++) {
      if (b == home || outbox_.empty(b)) continue;
      Outbox::Bucket batch = outbox_.take(b);
      owner_of(batch.head)->inbox_.enqueue(batch.head, batch.tail);
      batches_sent_++;
    }
    if (outbox_.empty(home)) break;
    QueueNode* list = outbox_.take(home).head;
    unsigned next_shift = shift + config::kBucketBits;
    while (list != nullptr) {
      QueueNode* next = list->next.load(std::memory_order_relaxed);
      file_message(owner_of(list), list, next_shift);
      list = next;
    }
  }
  outbox_.bytes = 0;
}

void Allocator::drain_inbox(bool all) {
  uint64_t received = 0;
  uint64_t forwarded = 0;
  draining_ = true;  // return_to_slab must not come back here
  for (;;) {
    if (!all && received == config::kInboxBudget) break;
    QueueNode* node = inbox_.dequeue();
    if (node == nullptr) break;
    received++;
    ChunkMeta* m = pagemap::lookup(node);
    auto* owner = static_cast<Allocator*>(m->owner);
    if (owner == this) {
      return_to_slab(m, node);
    } else {
      // Sent here because our id shares the owner's low bits: pass it on.
      file_message(owner, node, 0);
      outbox_.bytes += m->obj_size;
      forwarded++;
    }
  }
  draining_ = false;
  if (received == 0) return;
  inbox_drains_++;
  messages_received_ += received;
  if (forwarded != 0) {
    messages_forwarded_ += forwarded;
    messages_sent_ += forwarded;
    // Forwarded messages go on at once: the sender's flush already waited
    // for a full outbox, and this thread may not free anything for a while.
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
