// ds/freelist.h — intrusive singly linked free lists of objects.
//
// A free object's link word (config::kLinkWord: the first or the second)
// links it to the next.  In the secure build
// (config::kEncodeLinks) the word holds next ^ key ^ (the holder's own
// address): a per-process random key and a per-object tweak that any thread
// can compute, so a remote thread links a batch without the owner's state,
// and a link overwritten blindly (an overflow, a write after free) decodes
// to an address nowhere near its slab, which the reader checks
// (frontend/checks.h) before following it.
//
// Owns: the link's encoding, the key, and the list operations on it.  Must
// never: know which slab or allocator a list belongs to, or check a link
// (that is frontend/checks.h's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.h"
#include "ds/bits.h"

namespace roost {

struct FreeObject {
  // word[config::kLinkWord]: the next object, encoded (freelist::next /
  // set_next); the other: the free mark (ds/free_mark.h).
  uintptr_t word[2];
};

namespace freelist {

// The key links are encoded with (0 until set_key(), at start-up before
// any object is linked; the default build never sets it).
inline uintptr_t g_key ROOST_HIDDEN = 0;

inline void set_key(uint64_t key) { g_key = key; }

ROOST_INLINE FreeObject* as_object(void* p) { return static_cast<FreeObject*>(p); }

// What `o`'s link says; in the secure build not yet checked.
ROOST_INLINE FreeObject* next(const FreeObject* o) {
  uintptr_t v = o->word[config::kLinkWord];
  if constexpr (config::kEncodeLinks) v ^= g_key ^ reinterpret_cast<uintptr_t>(o);
  return reinterpret_cast<FreeObject*>(v);
}

// next(o) ^ o, the distance between `o` and its successor as bits that
// differ: in the secure build one XOR of the stored word (the holder's
// address cancels).
ROOST_INLINE uintptr_t next_apart(const FreeObject* o) {
  uintptr_t v = o->word[config::kLinkWord];
  if constexpr (config::kEncodeLinks) return v ^ g_key;
  return v ^ reinterpret_cast<uintptr_t>(o);
}

ROOST_INLINE void set_next(FreeObject* o, const FreeObject* n) {
  uintptr_t v = reinterpret_cast<uintptr_t>(n);
  if constexpr (config::kEncodeLinks) v ^= g_key ^ reinterpret_cast<uintptr_t>(o);
  o->word[config::kLinkWord] = v;
}

ROOST_INLINE void push(FreeObject*& head, void* p) {
  FreeObject* o = as_object(p);
  set_next(o, head);
  head = o;
}

ROOST_INLINE FreeObject* pop(FreeObject*& head) {
  FreeObject* o = head;
  head = next(o);
  return o;
}

// Does nothing to an object build() links (its default `visit`).
struct LeaveAsIs {
  ROOST_INLINE void operator()(FreeObject*) const {}
};

// Links `count` objects of `stride` bytes starting at `first` into a list
// that ends in `tail_next`; returns the head.  `visit(o)` is called on each
// object as it is linked (in the same pass over its memory).
template <typename Visit = LeaveAsIs>
inline FreeObject* build(uintptr_t first, size_t stride, size_t count, FreeObject* tail_next,
                         Visit visit = {}) {
  FreeObject* head = tail_next;
  for (uintptr_t at = first + count * stride; at != first;) {
    at -= stride;
    auto* o = reinterpret_cast<FreeObject*>(at);
    set_next(o, head);
    visit(o);
    head = o;
  }
  return head;
}

// The most objects one build_shuffled() links (a carve's: at most a page of
// the smallest objects).
inline constexpr size_t kMaxShuffled = 256;

// build() in an order drawn at random (the hardened build's carves), from a
// per-thread generator seeded with `seed` the first time.
template <typename Visit = LeaveAsIs>
inline FreeObject* build_shuffled(uintptr_t first, size_t stride, size_t count,
                                  FreeObject* tail_next, uint64_t seed, Visit visit = {}) {
  static thread_local uint64_t state = 0;
  if (state == 0) state = seed | 1;
  uint16_t order[kMaxShuffled];
  if (count > kMaxShuffled) return build(first, stride, count, tail_next, visit);
  for (size_t i = 0; i < count; i++) order[i] = static_cast<uint16_t>(i);
  for (size_t i = count; i > 1; i--) {
    // xorshift64*; the high bits pick the place (a multiply, no division).
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    uint64_t r = state * 0x2545f4914f6cdd1dull;
    size_t j = static_cast<size_t>((static_cast<unsigned __int128>(r) * i) >> 64);
    uint16_t t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
  FreeObject* head = tail_next;
  for (size_t i = 0; i < count; i++) {
    auto* o = reinterpret_cast<FreeObject*>(first + order[i] * stride);
    set_next(o, head);
    visit(o);
    head = o;
  }
  return head;
}

}  // namespace freelist
}  // namespace roost
