// frontend/messenger.cc — implementation of frontend/messenger.h.
#include "frontend/messenger.h"

#include "ds/counter.h"
#include "options.h"
#include "platform/text_section.h"

namespace roost {

namespace {

// Frees by threads without an allocator, each posted alone: any thread
// adds to these.
MessageCounters g_alone;
// Batches the service found whole (look_for_neglected_mail): the service
// adds to these.
MessageCounters g_collected;

// Set once at start-up, before roost is ready (global_init's release), so
// relaxed.
std::atomic<void (*)()> g_mail_hook{nullptr};
// Set by a post to a bound allocator; cleared by the service.  Relaxed,
// behind full fences on both sides (deliver(), take_live_mail_flag()).
std::atomic<bool> g_live_mail{false};

void call_mail_hook() {
  // Relaxed: set before roost is ready (see g_mail_hook).
  if (void (*hook)() = g_mail_hook.load(std::memory_order_relaxed)) hook();
}

}  // namespace

ROOST_COMMON_TEXT void Messenger::set_mail_hook(void (*hook)()) {
  // Relaxed: at start-up, published by global_init's release (see g_mail_hook).
  g_mail_hook.store(hook, std::memory_order_relaxed);
}

ROOST_COMMON_TEXT void Messenger::deliver(Messenger* dest, QueueNode* first, QueueNode* last) {
  dest->inbox_.enqueue(first, last);
  // Either the parker's fence (set_parked) comes first and this load sees
  // it parked, or the parker, after its fence, asks the service to look
  // (the pool does so for any allocator parked with slabs), and it finds
  // this message.
  full_fence();
  // Relaxed loads, both: the fence above orders them (store buffering with
  // set_parked()'s fence, and with take_live_mail_flag()'s).
  if (ROOST_UNLIKELY(dest->parked_.load(std::memory_order_relaxed))) {
    call_mail_hook();
  } else if (ROOST_UNLIKELY(!g_live_mail.load(std::memory_order_relaxed))) {
    // The service looks at bound allocators' inboxes only while mail is
    // posted (a load here, a store once per look).  Relaxed: the hook's fence
    // (service::want) orders it before the service's idle handshake.
    g_live_mail.store(true, std::memory_order_relaxed);
    call_mail_hook();
  }
}

ROOST_COMMON_TEXT bool Messenger::take_live_mail_flag() {
  // Relaxed load (skips the write while clear) and exchange: the fence below
  // orders the look after them.
  if (!g_live_mail.load(std::memory_order_relaxed) ||
      !g_live_mail.exchange(false, std::memory_order_relaxed))
    return false;
  // A sender that found the flag still set did not call the service: its
  // message must be seen by the look this take schedules.  The sender
  // enqueued, fenced and read the flag; this side cleared it, fences, and
  // looks later: store buffering, so a full fence on both sides
  // (acquire/release would let the look miss the message, which then waits
  // for its owner; tests/unit/litmus_test.cc).
  full_fence();
  return true;
}

// Relaxed: the service reads it behind sleep_until()'s fence, which pairs
// with the fence of want(), the mail hook deliver() calls after setting it.
ROOST_COMMON_TEXT bool Messenger::live_mail_flag() {
  return g_live_mail.load(std::memory_order_relaxed);
}

ROOST_COMMON_TEXT Messenger::Look Messenger::look_for_neglected_mail(uint64_t now,
                                                                     uint64_t delay_ns) {
  Look look;
  // Relaxed: a hint (a stale answer costs one look; the inbox's flag
  // decides who consumes).
  if (parked_.load(std::memory_order_relaxed)) return look;
  if (!hold_inbox(false)) {
    look.pending = true;  // its owner is receiving: see what it left later
    return look;
  }
  uint64_t receives = receives_.load(std::memory_order_relaxed);  // relaxed: the inbox is held
  // Whole slabs an earlier sort handed back: the owner takes them only
  // holding the inbox, so they stay while we hold it (relaxed: the hold's
  // acquire, and its release for the owner, order the links).  Gone: the
  // owner took them.  Still there a purge delay on: it has not received
  // for that long, and they are purged.
  ChunkMeta* whole = whole_slabs_.load(std::memory_order_relaxed);
  if (whole == nullptr) {
    whole_unpurged_ = false;
  } else if (whole_unpurged_ && now - whole_since_ >= delay_ns) {
    look.bytes_purged += mail_sorter::purge_whole(whole);
    whole_unpurged_ = false;
  }
  // Mail not sorted yet: new in the inbox, or left over by a sort that ran
  // out of table.
  bool unsorted = inbox_.maybe_nonempty() || sort_again_;
  // It was there at the last look, and the owner has not received since:
  // it has waited a whole period.
  if (unsorted && seen_mail_ && receives == seen_receives_) {
    sort_mail(&look, now);
    unsorted = inbox_.maybe_nonempty() || sort_again_;
  }
  seen_receives_ = receives;
  seen_mail_ = unsorted;
  release_inbox();
  look.pending = unsorted || whole_unpurged_;
  return look;
}

void Messenger::sort_mail(Look* look, uint64_t now) {
  mail_sorter::Sorter sorter(slab_owner_);
  // What the last sort kept, and everything posted since (a batch whose
  // producer is mid-enqueue stays for the next look).
  while (QueueNode* node = next_batch()) sorter.add(node);
  mail_sorter::Result r = sorter.finish();
  sorted_first_.store(r.rest_first, std::memory_order_relaxed);  // relaxed: the inbox is held
  // Some slabs did not fit: sort again at the next look, if this one found
  // any whole (else the table is full of slabs that are not).
  sort_again_ = r.overflowed && r.whole_slabs != 0;
  if (r.whole != nullptr) {
    // release: the owner's acquire exchange sees the links written here
    // (a failed try only reloads the head).
    ChunkMeta* head = whole_slabs_.load(std::memory_order_relaxed);
    do {
      mail_sorter::relink_last(r.whole_last, head);
    } while (!whole_slabs_.compare_exchange_weak(head, r.whole, std::memory_order_release,
                                                 std::memory_order_relaxed));
    // A new list waits from now; slabs joining one the owner has not
    // taken wait with it, from its start (the owner has not received since).
    if (head == nullptr || !whole_unpurged_) whole_since_ = now;
    whole_unpurged_ = true;
    add_shared_counter(g_collected.messages_received, r.whole_objects);
    add_shared_counter(g_collected.slab_batches_received, r.whole_batches);
    add_shared_counter(g_collected.inbox_drains, 1);
  }
  look->whole_slabs += r.whole_slabs;
}

void MessageCounters::add(const MessageCounters& from) {
#define ROOST_STAT(name, source, description) ROOST_MESSAGE_COUNTER_##source(name)
#define ROOST_MESSAGE_COUNTER_message(name) name += read_counter(from.name);
#define ROOST_MESSAGE_COUNTER_message_max(name) \
  if (uint64_t v = read_counter(from.name); v > name) name = v;
#define ROOST_MESSAGE_COUNTER_derived(name)
#include "roost_stats.def"
#undef ROOST_STAT
#undef ROOST_MESSAGE_COUNTER_message
#undef ROOST_MESSAGE_COUNTER_message_max
#undef ROOST_MESSAGE_COUNTER_derived
}

ROOST_COMMON_TEXT void Messenger::load_options() {
  outbox_limit_ = options::get(options::kOutboxBytes);
  outbox_.reset_room(outbox_limit_);
  batchit_ = options::get(options::kBatchIt) != 0;
}

ROOST_COMMON_TEXT void Messenger::post(bool keep_lanes) {
  if constexpr (config::kBatchIt) {
    uint64_t batches = 0, objects = 0;
    remote_cache_.flush(
        [&](const RemoteCache::Batch& b) {
          file_batch(b.slab, b.head, b.tail, b.count);
          batches++;
          objects += b.count;
        },
        keep_lanes);
    if (batches != 0) count_sent(batches, objects);
  }
  // Round r sends every bucket but the home one (this allocator's id bits
  // at the round's shift) to the owner of its first object; the home
  // bucket's objects share those bits with us but belong to others, so they
  // are re-sorted by the next bits (but a batch of a slab this allocator
  // has adopted since it was filed, which goes to its own inbox).  Ids
  // differ somewhere, so this ends within 32 / kBucketBits rounds.
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
      QueueNode* next = list->next(std::memory_order_relaxed);  // relaxed: the outbox's own
      Messenger* dest = owner_of(list);
      // A slab this allocator adopted after the batch was filed: its own
      // inbox takes it (its id would stay home at every shift).
      if (ROOST_UNLIKELY(dest == this)) {
        deliver(this, list, list);
      } else {
        file(dest, list, next_shift);
      }
      list = next;
    }
  }
  outbox_.reset_room(outbox_limit_);
}

ROOST_COMMON_TEXT void Messenger::note_received(uint64_t batches, uint64_t objects,
                                                uint64_t forwarded, uint64_t forwarded_batches) {
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
  checks::tail_unwritten(m, o);
  QueueNode* node = slab_batch::seal(o, o, 1, m->obj_size);
  deliver(owner_of(m), node, node);
  add_shared_counter(g_alone.remote_frees, 1);
  add_shared_counter(g_alone.batches_sent, 1);
  add_shared_counter(g_alone.slab_batches_sent, 1);
}

const MessageCounters& Messenger::alone_counters() { return g_alone; }
const MessageCounters& Messenger::collected_counters() { return g_collected; }

}  // namespace roost
