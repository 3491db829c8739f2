// frontend/foreign_reuse.h — demand-driven reuse of other allocators'
// objects (config::kForeignReuse, ROOST_FOREIGN_REUSE): which batches of
// its BatchIt cache a thread keeps on its own fast lists when it posts, and
// sending home what it kept and did not hand out.
//
// At each post (Allocator::post_and_visit; not a settle) the thread looks
// at each size class it has batches of in its cache, or kept objects of,
// over the window since the last post that looked at the class (so a class
// freed remotely now and then has a window of several posts):
//   used    its allocations of the class;
//   remote  its remote frees of the class (sent, or waiting in the cache).
// The gate: a class is kept only while remote * 2 > used, that is while
// most of what the thread frees of the class is remote.  Its allocations
// stand for its frees of the class: local frees are not counted as they
// happen (the free fast path has no counter), and a thread in a steady
// state frees about what it allocates.  A thread whose frees are mostly
// local (larson's, which inherit their predecessor's objects) keeps
// nothing, so its local frees do not turn into remote ones; a thread that
// only frees a class (a consumer) has no demand for it and keeps nothing.
// The demand: `used`, less what the class's fast list still holds (walked,
// no further than that), at most a slab's objects.  The cache's batches
// of the class, whole, up to the demand, go in front of the fast list
// instead of into a message; the next allocations hand them out first.
// They stay their owner's (its slab counts them out): freed again, by
// anyone, they take the remote path.  At the next post, the first
// kept - used objects of the fast list (when positive) are what is left of
// them: they go home by message then.
//
// Every path that lets a fast list go (Allocator::release_unused: trim,
// thread exit, a pooled allocator's release, the pool's help) first sends
// the foreign objects on every fast list home (send_all_home), so that only
// this allocator's own objects reach its slabs.
//
// Owns: per class, the window's marks and the objects kept at the last
// post, and whether a foreign object may be on a fast list.  Must never:
// return a kept object to a slab (its owner takes it back from a message);
// run on a fast path; keep anything where a freed object's check needs it
// (the secure and hardened builds: config::kForeignReuse is off there).
#pragma once

#include <cstdint>

#include "backend/chunk_meta.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/freelist.h"
#include "ds/sizeclass.h"
#include "frontend/checks.h"
#include "frontend/messenger.h"
#include "frontend/ownership.h"

namespace roost {

class ForeignReuse {
 public:
  // ROOST_FOREIGN_REUSE for this allocator (read when a thread takes it).
  void set_on(bool on) { on_ = on; }
  bool on() const { return on_; }

  // At a post of the allocator `self`, before Messenger::post(): what was
  // kept at the last post and is still on `fast` (its fast lists) goes
  // home; then, when `may_keep`, the cache's batches of each class the
  // thread has demand for (above) go in front of that class's fast list.
  // `allocs`: its allocation counts (EventCounts); `frees`: its class free
  // counters, which count the kept objects' frees (they leave the cache,
  // where statistics counted them, unsent).
  template <typename Allocs>
  void at_post(FreeObject** fast, const Allocs& allocs, uint64_t* frees, Messenger& mail,
               const void* self, bool may_keep) {
    uint32_t cached[sizeclass::kCount] = {};
    mail.count_cached(cached);
    uint32_t demand[sizeclass::kCount] = {};
    bool any = false;
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      Window& w = windows_[sc];
      // Nothing cached and nothing kept: nothing to decide.  The class's
      // marks stay, so its next window runs from the last post that looked.
      if (cached[sc] == 0 && w.kept == 0) continue;
      uint64_t now = allocs.read(sc);
      uint64_t used = now - w.allocs_mark;
      uint64_t sent = mail.sent_by_class(sc);
      uint64_t remote = sent + cached[sc] - w.remote_mark;
      uint64_t left = w.kept > used ? w.kept - used : 0;
      if (left != 0) send_front_home(&fast[sc], static_cast<uint32_t>(left), mail, self, sc);
      w.kept = 0;
      w.allocs_mark = now;
      // Kept objects leave the cache unsent: the next window's remote
      // frees start from what this post sends.
      w.remote_mark = sent + cached[sc];
      if (!may_keep || cached[sc] == 0 || used <= left || remote * 2 <= used) continue;
      uint64_t want = used - left;
      uint32_t cap = sizeclass::kInfo.info[sc].capacity;
      if (want > cap) want = cap;
      want -= length_up_to(fast[sc], want, sc);
      demand[sc] = static_cast<uint32_t>(want);
      any |= want != 0;
    }
    if (!any) return;
    mail.keep_for_reuse(
        [&demand](unsigned sc, uint32_t objects) {
          if (objects > demand[sc]) return false;
          demand[sc] -= objects;
          return true;
        },
        [&](const RemoteCache::Batch& b) {
          unsigned sc = b.slab->sizeclass;
          freelist::set_next(b.tail, fast[sc]);
          fast[sc] = b.head;
          Window& w = windows_[sc];
          w.kept += b.count;
          w.remote_mark -= b.count;
          bump_counter(frees[sc], b.count);
          holds_ = true;
        });
  }

  // Every object on `fast` (the fast lists of allocator `self`) of a slab
  // `self` does not own goes home by message, filed; its own stay, in
  // order.  Returns whether any was filed (the caller then posts).
  bool send_all_home(FreeObject** fast, Messenger& mail, const void* self) {
    if (!holds_) return false;
    holds_ = false;
    bool filed = false;
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      windows_[sc].kept = 0;
      FreeObject* own_head = nullptr;
      FreeObject* own_tail = nullptr;
      Run run;
      for (FreeObject* o = fast[sc]; o != nullptr;) {
        FreeObject* next = checks::next_checked(sc, o);
        ChunkMeta* m = pagemap::lookup(o);
        if (ownership::is(m, self)) {
          if (own_tail == nullptr)
            own_head = o;
          else
            freelist::set_next(own_tail, o);
          own_tail = o;
        } else {
          run.add(m, o, mail);
          filed = true;
        }
        o = next;
      }
      run.end(mail);
      if (own_tail != nullptr) freelist::set_next(own_tail, nullptr);
      fast[sc] = own_head;
    }
    return filed;
  }

 private:
  // Objects of one slab in a row, going home as one message.
  struct Run {
    ChunkMeta* slab = nullptr;
    FreeObject* head = nullptr;
    FreeObject* tail = nullptr;
    uint32_t count = 0;

    void add(ChunkMeta* m, FreeObject* o, Messenger& mail) {
      if (m == slab) {
        freelist::set_next(tail, o);
        tail = o;
        count++;
        return;
      }
      end(mail);
      slab = m;
      head = tail = o;
      count = 1;
    }
    void end(Messenger& mail) {
      if (slab != nullptr) mail.send_unused_home(slab, head, tail, count);
      slab = nullptr;
    }
  };

  // The first objects of `*list`, at most `limit`, while they are of slabs
  // `self` does not own, go home (filed); the list keeps the rest.
  static void send_front_home(FreeObject** list, uint32_t limit, Messenger& mail, const void* self,
                              unsigned sc) {
    Run run;
    FreeObject* o = *list;
    for (uint32_t i = 0; i < limit && o != nullptr; i++) {
      ChunkMeta* m = pagemap::lookup(o);
      if (ownership::is(m, self)) break;  // (adopted since it was kept: its own now)
      FreeObject* next = checks::next_checked(sc, o);
      run.add(m, o, mail);
      o = next;
    }
    run.end(mail);
    *list = o;
  }

  // The length of `list`, counted up to `limit`.
  static uint64_t length_up_to(FreeObject* list, uint64_t limit, unsigned sc) {
    uint64_t n = 0;
    for (FreeObject* o = list; o != nullptr && n < limit; o = checks::next_checked(sc, o)) n++;
    return n;
  }

  // One class's window: its allocations and remote frees at the last post,
  // and the objects kept then.
  struct Window {
    uint64_t allocs_mark = 0;
    uint64_t remote_mark = 0;
    uint64_t kept = 0;
  };
  Window windows_[sizeclass::kCount] = {};
  bool on_ = false;
  bool holds_ = false;  // a kept object may be on a fast list
};

}  // namespace roost
