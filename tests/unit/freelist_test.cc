// Free lists and intrusive lists: order, counts, removal anywhere.
#include <gtest/gtest.h>

#include <vector>

#include "ds/dlist.h"
#include "ds/freelist.h"

using namespace roost;

TEST(FreeList, PushPopIsLastInFirstOut) {
  alignas(16) char objects[4][16];
  FreeObject* head = nullptr;
  for (auto& o : objects) freelist::push(head, o);
  for (int i = 3; i >= 0; i--) EXPECT_EQ(freelist::pop(head), freelist::as_object(objects[i]));
  EXPECT_EQ(head, nullptr);
}

TEST(FreeList, BuildLinksObjectsInAddressOrderAndEndsInTheTail) {
  alignas(16) char area[10 * 48];
  alignas(16) char tail_obj[16];
  FreeObject* tail = freelist::as_object(tail_obj);
  tail->next = nullptr;
  FreeObject* head = freelist::build(reinterpret_cast<uintptr_t>(area), 48, 10, tail);
  for (int i = 0; i < 10; i++) {
    ASSERT_EQ(reinterpret_cast<char*>(head), area + 48 * i);
    head = head->next;
  }
  EXPECT_EQ(head, tail);
}

struct Node {
  Node* prev;
  Node* next;
  int value;
};

TEST(DList, RemoveFromHeadMiddleAndTail) {
  std::vector<Node> nodes(5);
  DList<Node> list;
  for (int i = 0; i < 5; i++) {
    nodes[i].value = i;
    list.push_front(&nodes[i]);
  }
  list.remove(&nodes[4]);  // head
  list.remove(&nodes[2]);  // middle
  list.remove(&nodes[0]);  // tail
  std::vector<int> seen;
  for (Node* n = list.head; n != nullptr; n = n->next) seen.push_back(n->value);
  EXPECT_EQ(seen, (std::vector<int>{3, 1}));
  EXPECT_EQ(list.pop_front()->value, 3);
  EXPECT_EQ(list.pop_front()->value, 1);
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.pop_front(), nullptr);
}
