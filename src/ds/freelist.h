// ds/freelist.h — intrusive singly linked free lists of objects.
//
// Owns: the link stored in a free object's first word and the list
// operations on it.  Must never: know which slab or allocator a list belongs
// to.  (The hardened build's encoded links will live here.)
#pragma once

#include "ds/bits.h"

namespace roost {

struct FreeObject {
  FreeObject* next;
};

namespace freelist {

ROOST_INLINE FreeObject* as_object(void* p) { return static_cast<FreeObject*>(p); }

ROOST_INLINE void push(FreeObject*& head, void* p) {
  FreeObject* o = as_object(p);
  o->next = head;
  head = o;
}

ROOST_INLINE FreeObject* pop(FreeObject*& head) {
  FreeObject* o = head;
  head = o->next;
  return o;
}

// Links `count` objects of `stride` bytes starting at `first` into a list
// that ends in `tail_next`; returns the head.
inline FreeObject* build(uintptr_t first, size_t stride, size_t count, FreeObject* tail_next) {
  FreeObject* head = tail_next;
  for (size_t i = count; i > 0; i--) {
    auto* o = reinterpret_cast<FreeObject*>(first + (i - 1) * stride);
    o->next = head;
    head = o;
  }
  return head;
}

}  // namespace freelist
}  // namespace roost
