// frontend/messenger.h — an allocator's mail: frees of other allocators'
// objects going out, its own objects coming back.
//
// Owns: the inbox (an MPSC queue other allocators post to), the BatchIt
// remote cache and the outbox behind it, the options they run by, the
// allocator's dense id (which picks outbox buckets), and the message
// counters.  Remote frees are collected per slab in the cache, each slab's
// as one batch (BatchIt), and filed in the outbox's buckets by owner id;
// when the outbox holds ROOST_OUTBOX_BYTES (or a stretch of it, when a
// thread waits for its objects) it is posted, one atomic exchange per
// bucket.  Receiving takes a bounded
// number of batches from the inbox, hands each batch of its own to the
// caller, and forwards the others (home-bucket forwarding: ids that share
// low bits with ours; and slabs adopted by another allocator since).
//
// The inbox has one consumer at a time: its allocator's thread, or the
// service thread sorting the mail of a thread that has not received any for
// a while (frontend/mail_sorter.h), which hands back the slabs it found
// whole and keeps the rest beside the inbox, sorted (the owner receives it
// before the inbox; the next sort takes it again).  Whoever consumes holds
// the inbox (one exchange per receive); a refill that finds it held goes
// on without its mail.
//
// Must never: touch a slab's free list or state (the caller's `deliver`
// and `restart` do), wait for the inbox anywhere but a settle, or post with
// anything but one exchange per bucket.
#pragma once

#include <atomic>
#include <cstdint>

#include "backend/chunk_meta.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/counter.h"
#include "ds/fence.h"
#include "ds/mpsc_queue.h"
#include "ds/sizeclass.h"
#include "ds/slab_batch.h"
#include "frontend/checks.h"
#include "frontend/mail_sorter.h"
#include "frontend/outbox.h"
#include "frontend/ownership.h"
#include "frontend/remote_cache.h"
#include "platform/os.h"

namespace roost {

// The `message` counters of roost_stats.def, kept by one messenger.
struct MessageCounters {
#define ROOST_STAT(name, source, description) ROOST_MESSAGE_COUNTER_##source(name)
#define ROOST_MESSAGE_COUNTER_message(name) uint64_t name = 0;
#define ROOST_MESSAGE_COUNTER_message_max(name) uint64_t name = 0;
#define ROOST_MESSAGE_COUNTER_derived(name)
#include "roost_stats.def"
#undef ROOST_STAT
#undef ROOST_MESSAGE_COUNTER_message
#undef ROOST_MESSAGE_COUNTER_message_max
#undef ROOST_MESSAGE_COUNTER_derived

  // Adds another thread's counters (its highest figures: the higher of
  // each), read while that thread may write them (statistics are
  // approximate until it rests).
  void add(const MessageCounters& from);
};

class Messenger {
 public:
  // `id`: the allocator's; `slab_owner`: what its slabs record as their
  // owner (frontend/ownership.h).
  constexpr Messenger(uint32_t id, const void* slab_owner) : slab_owner_(slab_owner), id_(id) {}
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  // A thread is taking this allocator: the options it caches.
  void load_options();

  // Sending `p`, an object of slab `m` that another allocator owns.  The
  // caller's fast path (Allocator::try_free_remote) appends it to the batch
  // of its class's lane when that batch is of slab `m`, then charge()s the
  // outbox for its bytes; else send_other() files it, into the cache
  // (`cache`) or alone, and charges.  Both say whether a stretch of the
  // outbox's room ended: the caller then asks stretch_ended(), and post()s
  // (and receives) when it says the outbox is full, or when another thread
  // waits for its objects with a call this sender has not answered
  // (Backpressure::answer_call()).
  ROOST_INLINE RemoteCache::Entry* lane(unsigned sc) const { return remote_cache_.lane(sc); }
  ROOST_INLINE void append(RemoteCache::Entry* e, void* p) {
    remote_cache_.append(e, static_cast<FreeObject*>(p));
  }
  ROOST_INLINE bool charge(uint32_t bytes) { return outbox_.charge(bytes); }
  inline bool send_other(ChunkMeta* m, void* p, bool cache);
  bool stretch_ended() { return outbox_.stretch_ended(); }
  // ---- foreign reuse (config::kForeignReuse; frontend/foreign_reuse.h) ----

  // Adds to by_class[sc] the objects of class `sc` the BatchIt cache holds
  // (remote frees not sent yet).
  void count_cached(uint32_t* by_class) const {
    remote_cache_.for_each_started([by_class](unsigned sc, uint32_t n) { by_class[sc] += n; });
  }
  // Every cached batch keep(class, objects) says yes to leaves the cache
  // unsent, to fn(const RemoteCache::Batch&) (its tail's link not written),
  // its objects counted as kept and as remote frees (statistics counted
  // them so while cached; the caller counts their frees).  Called just
  // before post(), which gives the outbox its whole room back.
  template <typename Keep, typename Fn>
  void keep_for_reuse(Keep&& keep, Fn&& fn) {
    remote_cache_.take_kept(keep, [&](const RemoteCache::Batch& b) {
      bump_counter(counters_.foreign_kept, b.count);
      bump_counter(counters_.remote_frees, b.count);
      fn(b);
    });
  }
  // Objects of slab `m` (another allocator's) kept and not handed out,
  // head..tail linked, go home as one message, filed for the slab's owner
  // now (the next post() sends it).  Not counted as remote frees: they were
  // when kept.
  void send_unused_home(ChunkMeta* m, FreeObject* head, FreeObject* tail, uint32_t count) {
    file(owner_of(m), slab_batch::seal(head, tail, count, m->obj_size), 0);
    bump_counter(counters_.slab_batches_sent);
    bump_counter(counters_.foreign_sent_home, count);
  }
  // Back-pressure made its allocator wait; `fed`: its objects came home.
  void count_wait(bool fed) {
    bump_counter(counters_.backpressure_waits);
    if (fed) bump_counter(counters_.backpressure_waits_fed);
  }

  // Posts the remote cache's batches and every outbox bucket (forwarding
  // rounds included).  `keep_lanes`: the cache's ways keep their slabs
  // (RemoteCache::flush); a settle lets them all go.
  void post(bool keep_lanes = true);

  // Could the inbox hold messages, or the service have sorted some?  Four
  // loads, and a hint: a sort in progress holds the mail in none of these
  // places (a settle receives under the inbox instead).
  bool has_mail() const {
    // Relaxed: a hint; receive() takes what is there with acquire.
    return inbox_.maybe_nonempty() || whole_slabs_.load(std::memory_order_relaxed) != nullptr ||
           sorted_first_.load(std::memory_order_relaxed) != nullptr;
  }

  // Takes batches from the inbox: at most config::kInboxStage, or until
  // it reads empty when `all`.  Each batch of this allocator's objects goes
  // to deliver(ChunkMeta* slab, const slab_batch::Batch&); others are
  // forwarded and posted at once.  First, every slab the service found
  // whole goes to restart(ChunkMeta* slab, bool zeroed) (none of its
  // objects is on its free list; its pages were purged, and read as zero
  // when `zeroed`).  Returns the objects received.  When the service holds
  // the inbox, returns 0 at once, or waits for it when `all`.
  // Inlined into its one caller, Allocator::receive, so that it lies with it
  // in the common text (platform/text_section.h: a template takes no section).
  template <typename Deliver, typename Restart>
  ROOST_INLINE uint64_t receive(bool all, Deliver&& deliver, Restart&& restart);

  // ---- the service thread's side (frontend/mail_sorter.h) ----

  // What one look at an inbox did.
  struct Look {
    bool pending = false;       // mail it has not sorted, or whole slabs not purged: look again
    uint64_t whole_slabs = 0;   // slabs found whole and handed back
    uint64_t bytes_purged = 0;  // of whole slabs that waited `delay_ns` unclaimed
  };
  // Looks at the inbox of an allocator bound to a thread, once per purge
  // delay or so: when mail waited there since the last look and the thread
  // has not received since, sorts it all (frontend/mail_sorter.h) and hands
  // the slabs it finds whole back to the owner, resident.  When those have
  // waited `delay_ns` (the purge delay in force) since, not taken (the
  // owner has not received for that long: it sleeps, it was not blocked
  // for a moment), purges them.  `now`: os::now_ns().  Skips the inbox
  // while its owner holds it, and parked allocators.  Only the service
  // calls it (its fields are the service's).
  Look look_for_neglected_mail(uint64_t now, uint64_t delay_ns);
  // Was mail posted to an allocator bound to a thread since the last call?
  // (A post sets the flag and calls the mail hook when it was clear.)
  static bool take_live_mail_flag();
  static bool live_mail_flag();

  // For a thread without an allocator (past its exit hook): posts `p` to
  // its owner's inbox alone, counted process-wide.
  static void send_alone(ChunkMeta* m, void* p);

  // Parked: the allocator waits in the pool without a thread.  A message
  // posted to a parked messenger calls the mail hook (set once, at start-up;
  // it must not allocate), so that someone delivers it; so does the first
  // message posted to a bound one since take_live_mail_flag().
  void set_parked(bool parked) {
    // Relaxed store, then a full fence that pairs with deliver()'s: store
    // buffering, where acquire/release would let both sides miss each
    // other (tests/unit/litmus_test.cc).
    parked_.store(parked, std::memory_order_relaxed);
    full_fence();
  }
  static void set_mail_hook(void (*hook)());
  // Relaxed: a hint (statistics, and adoption's look at a slab's owner,
  // which the pool makes again under its lock).
  bool parked() const { return parked_.load(std::memory_order_relaxed); }

  // This messenger's counters, those of frees sent alone, and those of
  // batches the service found whole (counted as received).
  const MessageCounters& counters() const { return counters_; }
  // Objects of class `sc` it sent (remote frees, counted as they leave the
  // BatchIt cache), read from any thread.
  uint64_t sent_by_class(unsigned sc) const { return read_counter(sent_by_class_[sc]); }
  // fn(class, objects) for each batch still in its BatchIt cache (remote
  // frees not sent yet), read from any thread (RemoteCache::for_each_batch).
  template <typename Fn>
  void for_each_cached(Fn&& fn) const {
    remote_cache_.for_each_batch(fn);
  }
  static const MessageCounters& alone_counters();
  static const MessageCounters& collected_counters();

 private:
  // The messenger of the allocator that owns slab `m`.
  static Messenger* owner_of(const ChunkMeta* m) { return ownership::messenger_of(m); }
  static Messenger* owner_of(QueueNode* node) { return owner_of(pagemap::lookup(node)); }

  // Files a message for `dest` under the bucket its id selects at `shift`.
  void file(Messenger* dest, QueueNode* node, unsigned shift) {
    outbox_.add((dest->id_ >> shift) & Outbox::kMask, node);
  }
  // Seals a batch of objects of slab `m` and files it for the slab's owner.
  // The objects count as remote frees of their class here, a batch at a
  // time (the free fast path counts nothing); the caller counts the batches
  // and objects it filed in all (count_sent).
  void file_batch(ChunkMeta* m, FreeObject* head, FreeObject* tail, uint32_t count) {
    checks::tail_unwritten(m, tail);
    file(owner_of(m), slab_batch::seal(head, tail, count, m->obj_size), 0);
    bump_counter(sent_by_class_[m->sizeclass], count);
  }
  void count_sent(uint64_t batches, uint64_t objects) {
    bump_counter(counters_.slab_batches_sent, batches);
    bump_counter(counters_.remote_frees, objects);
  }
  // Enqueues first..last in dest's inbox, and calls the mail hook when
  // dest is parked, or when the live-mail flag was clear.
  static void deliver(Messenger* dest, QueueNode* first, QueueNode* last);

  // After receiving: counts, and sends forwarded batches on.
  void note_received(uint64_t batches, uint64_t objects, uint64_t forwarded,
                     uint64_t forwarded_batches);

  // Takes the inbox's consumer side; false when another holds it and
  // `wait` is not set.
  bool hold_inbox(bool wait) {
    // acquire: the last holder's front_, sorted batches and their links
    // (all relaxed) are seen, as under a lock.
    while (inbox_held_.exchange(true, std::memory_order_acquire)) {
      if (!wait) return false;
      os::yield();
    }
    return true;
  }
  // release: hands what this holder wrote to the next.
  void release_inbox() { inbox_held_.store(false, std::memory_order_release); }
  // look_for_neglected_mail()'s sort, the inbox held.
  void sort_mail(Look* look, uint64_t now);
  // The next batch to receive, the inbox held: the sorted ones first.
  QueueNode* next_batch() {
    // Relaxed, here and below: the inbox is held (hold_inbox's acquire).
    QueueNode* node = sorted_first_.load(std::memory_order_relaxed);
    if (node == nullptr) {
      return inbox_.dequeue([](const QueueNode* holder, const QueueNode* next) {
        if constexpr (config::kCheckMessages) checks::message_link(holder, next);
      });
    }
    QueueNode* next = node->next(std::memory_order_relaxed);
    if constexpr (config::kCheckMessages) {
      if (next != nullptr) checks::message_link(node, next);
    }
    sorted_first_.store(next, std::memory_order_relaxed);  // relaxed: the inbox is held
    return node;
  }

  MpscQueue inbox_;
  std::atomic<bool> inbox_held_{false};  // the consumer's flag: acquire to take, release to give
  // Receives by the owner (it alone writes, holding the inbox; the service
  // reads it holding the inbox: relaxed).
  std::atomic<uint64_t> receives_{0};
  // From the service (mail_sorter links): pushed with release, taken with
  // acquire.
  std::atomic<ChunkMeta*> whole_slabs_{nullptr};
  // Batches the service sorted and did not find whole, linked through their
  // queue links (nullptr-terminated); changed only with the inbox held
  // (atomic for has_mail()).
  std::atomic<QueueNode*> sorted_first_{nullptr};
  // The service's own: what its last look saw.
  uint64_t seen_receives_ = 0;
  bool seen_mail_ = false;   // unsorted mail (or a sort to finish)
  bool sort_again_ = false;  // its last sort ran out of table
  // Whole slabs handed back and not purged wait in whole_slabs_ (which
  // the owner has not taken since whole_since_, when the list was started).
  bool whole_unpurged_ = false;
  uint64_t whole_since_ = 0;
  std::atomic<bool> parked_{false};  // relaxed, behind full fences (set_parked, deliver)
  Outbox outbox_;
  RemoteCache remote_cache_;
  uint64_t outbox_limit_ = 0;  // ROOST_OUTBOX_BYTES
  bool batchit_ = false;       // ROOST_BATCHIT
  const void* slab_owner_;
  uint32_t id_;
  MessageCounters counters_;
  uint64_t sent_by_class_[sizeclass::kCount] = {};
};

bool Messenger::send_other(ChunkMeta* m, void* p, bool cache) {
  auto* o = static_cast<FreeObject*>(p);
  RemoteCache::Batch evicted;
  if (!config::kBatchIt || !batchit_ || !cache || !slab_batch::batches_allowed(m->obj_size)) {
    file_batch(m, o, o, 1);
    count_sent(1, 1);
  } else if (remote_cache_.add(m, p, &evicted)) {
    file_batch(evicted.slab, evicted.head, evicted.tail, evicted.count);
    count_sent(1, evicted.count);
    bump_counter(counters_.batchit_evictions);
  }
  return outbox_.charge(m->obj_size);
}

template <typename Deliver, typename Restart>
uint64_t Messenger::receive(bool all, Deliver&& deliver, Restart&& restart) {
  if (!hold_inbox(all)) return 0;
  // Relaxed: written only holding the inbox, and read so (look_for_neglected_mail).
  receives_.store(receives_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  uint64_t restarted = 0;
  // A relaxed look first (a hint); acquire pairs with the service's release
  // push: the slabs' links, and their purge, before their records are read.
  if (ROOST_UNLIKELY(whole_slabs_.load(std::memory_order_relaxed) != nullptr)) {
    ChunkMeta* m = whole_slabs_.exchange(nullptr, std::memory_order_acquire);
    while (m != nullptr) {
      ChunkMeta* next = mail_sorter::next_whole(m);  // restart() may relink it
      restarted += sizeclass::kInfo.info[m->sizeclass].capacity;
      restart(m, mail_sorter::whole_zeroed(m));
      m = next;
    }
  }
  uint64_t batches = 0, objects = 0, forwarded = 0, forwarded_batches = 0;
  const void* mine = slab_owner_;
  while (all || batches < config::kInboxStage) {
    QueueNode* node = next_batch();
    if (node == nullptr) break;
    batches++;
    ChunkMeta* m = pagemap::lookup(node);
    if constexpr (config::kCheckMessages) checks::message(m, node);
    checks::batch_word_intact(m, node);
    slab_batch::Batch b = slab_batch::open(node, m->obj_size);
    if constexpr (config::kCheckMessages) checks::batch(m, b);
    objects += b.count;
    if (ownership::owner(m) == mine) {
      deliver(m, b);
    } else {
      // Sent here because our id shares the owner's low bits, or the slab
      // changed hands since it was sent (frontend/adoption.h): pass the
      // whole batch on.
      file(owner_of(m), node, 0);
      forwarded += b.count;
      forwarded_batches++;
    }
  }
  release_inbox();
  if (batches != 0) {
    if (!all && batches > counters_.inbox_longest_visit)
      bump_counter(counters_.inbox_longest_visit, batches - counters_.inbox_longest_visit);
    note_received(batches, objects, forwarded, forwarded_batches);
  }
  return objects + restarted;
}

}  // namespace roost
