// ds/mpsc_queue.h — the multi-producer single-consumer queue of an inbox.
//
// The Pony-runtime queue of the snmalloc paper (§2.2): a singly linked list
// from `front` (consumer only) to `back` (producers).  A producer appends a
// whole batch with one atomic exchange of `back` and one store; the consumer
// uses plain loads (acquire) and no read-modify-write.  A stub node keeps
// the list non-empty.  One consumer at a time (the inbox's holder: see
// frontend/messenger.h); `front` is atomic only so that maybe_nonempty()
// may be asked without being the consumer.  The queue is not linearizable:
// a batch whose producer has exchanged `back` but not yet linked its
// predecessor hides the batches behind it until it does.  Nodes live inside the objects they carry.
//
// Owns: the queue's links, their encoding (secure build) and their memory
// orders.  Must never: allocate, know what the nodes mean, or let the
// consumer block.
#pragma once

#include <atomic>
#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost {

// The key queue links are encoded with (secure build: set at start-up,
// before any message is sent; the default build never sets it).
namespace queue_link {
inline uintptr_t g_key ROOST_HIDDEN = 0;
inline void set_key(uint64_t key) { g_key = key; }
}  // namespace queue_link

// A node's link to the next.  In the secure build (config::kEncodeLinks)
// the word holds next ^ key ^ (the node's own address), as free-list links
// do (ds/freelist.h), so a pointer written into it blindly decodes to
// nowhere near an object, which the consumer's check sees; 0 stays the end
// of the list (so a node that was never linked, the stub's zero-initialised
// one included, ends it).
struct QueueNode {
  // The link's ordering is the caller's: each call site states its own.
  QueueNode* next(std::memory_order order) const { return decode(link_.load(order)); }
  void set_next(QueueNode* n, std::memory_order order) { link_.store(encode(n), order); }

 private:
  uintptr_t tweak() const { return queue_link::g_key ^ reinterpret_cast<uintptr_t>(this); }
  uintptr_t encode(QueueNode* n) const {
    uintptr_t v = reinterpret_cast<uintptr_t>(n);
    if constexpr (config::kEncodeLinks) return v == 0 ? 0 : v ^ tweak();
    return v;
  }
  QueueNode* decode(uintptr_t v) const {
    if constexpr (config::kEncodeLinks) v = v == 0 ? 0 : v ^ tweak();
    return reinterpret_cast<QueueNode*>(v);
  }

  std::atomic<uintptr_t> link_{0};
};

class MpscQueue {
 public:
  constexpr MpscQueue() : front_(&stub_), back_(&stub_) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // Resets to empty (no producer or consumer may be running).
  void init() {
    // Relaxed: whoever runs producers or a consumer next is ordered after
    // this by its own start (thread creation, a lock).
    stub_.set_next(nullptr, std::memory_order_relaxed);
    front_.store(&stub_, std::memory_order_relaxed);
    back_.store(&stub_, std::memory_order_relaxed);
  }

  // Any thread: appends the chain first..last (already linked through
  // set_next(); last's link is overwritten).
  void enqueue(QueueNode* first, QueueNode* last) {
    // Relaxed: published with the chain by the release below; the next
    // producer's acquire orders its own store to this link after it.
    last->set_next(nullptr, std::memory_order_relaxed);
    // acq_rel: release publishes the chain (and the objects' contents) to
    // the consumer; acquire orders our store into `prev` after whoever
    // enqueued `prev` linked it.
    QueueNode* prev = back_.exchange(last, std::memory_order_acq_rel);
    // release: the consumer's acquire on this link sees the chain, its
    // objects' contents, and last's null link.
    prev->set_next(first, std::memory_order_release);
  }

  // Is there possibly something to dequeue?  Two loads; the consumer's
  // answer is exact up to producers mid-enqueue, anyone else's a hint.
  bool maybe_nonempty() const {
    // Relaxed: a hint, ordering nothing (whoever acts on it dequeues, with
    // acquire; the protocols that must not miss mail fence before it).
    const QueueNode* front = front_.load(std::memory_order_relaxed);
    return front != &stub_ || front->next(std::memory_order_relaxed) != nullptr;
  }

  // Consumer: the oldest node, or nullptr when none is ready.  The stub is
  // never returned: when it comes to the front it is skipped, and when a
  // real node is the last one the stub is re-enqueued behind it so that
  // node can be handed out (one exchange per drained batch).
  // `check_link(holder, next)` sees every link before the queue follows it
  // (`holder` nullptr for the stub's): a caller that knows what the nodes
  // are may stop there at one that is not a node.
  template <typename CheckLink>
  QueueNode* dequeue(CheckLink&& check_link) {
    // front_: relaxed, the consumer's own (a new consumer is ordered after
    // the last by the inbox hand-over's acquire); next: acquire, pairing
    // with the producer's release of that link (the node's contents).
    QueueNode* front = front_.load(std::memory_order_relaxed);
    QueueNode* next = front->next(std::memory_order_acquire);
    if (front == &stub_) {
      if (next == nullptr) return nullptr;
      check_link(nullptr, next);
      front_.store(next, std::memory_order_relaxed);
      front = next;
      next = front->next(std::memory_order_acquire);
    }
    if (next == nullptr) {
      // `front` is the last linked node.  If no producer is past it, put
      // the stub behind it; otherwise wait for that producer's link (it
      // appears later: the consumer does not spin).
      // acquire, more than it needs: only compared (a stale value means
      // one more empty visit), and already ordered after front's enqueue
      // by the acquire that found front.
      if (back_.load(std::memory_order_acquire) != front) return nullptr;
      enqueue(&stub_, &stub_);
      next = front->next(std::memory_order_acquire);
      if (next == nullptr) return nullptr;
    }
    if (next != &stub_) check_link(front, next);
    front_.store(next, std::memory_order_relaxed);
    return front;
  }
  QueueNode* dequeue() {
    return dequeue([](const QueueNode*, const QueueNode*) {});
  }

 private:
  std::atomic<QueueNode*> front_;             // written by the consumer only (see dequeue)
  alignas(64) std::atomic<QueueNode*> back_;  // producers
  QueueNode stub_;
};

}  // namespace roost
