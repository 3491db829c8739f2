// ds/dlist.h — intrusive doubly linked lists with O(1) insert and remove.
//
// Owns: list structure over nodes that embed `prev`/`next` pointers.  Must
// never: allocate, or know what the nodes mean.
#pragma once

#include "ds/bits.h"

namespace roost {

// T must have members `T* prev; T* next;`.
template <typename T>
struct DList {
  T* head = nullptr;

  bool empty() const { return head == nullptr; }

  void push_front(T* n) {
    n->prev = nullptr;
    n->next = head;
    if (head != nullptr) head->prev = n;
    head = n;
  }

  void remove(T* n) {
    if (n->prev != nullptr)
      n->prev->next = n->next;
    else
      head = n->next;
    if (n->next != nullptr) n->next->prev = n->prev;
    n->prev = n->next = nullptr;
  }

  T* pop_front() {
    T* n = head;
    if (n != nullptr) remove(n);
    return n;
  }
};

}  // namespace roost
