// DList<T> (ds/dlist.h), the intrusive doubly linked list: push_front
// order, remove at the head, in the middle and at the tail with both link
// directions kept consistent, links cleared on remove, pop_front and
// empty().
#include "ds/dlist.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace roost;

namespace {

struct Node {
  Node* prev;
  Node* next;
  int value;
};

// The values from head to tail, checking on the way that every node's prev
// is the node before it (the head's is null).  Stops after 100 nodes, so a
// broken list that loops fails instead of hanging.
std::vector<int> values(const DList<Node>& list) {
  std::vector<int> out;
  Node* before = nullptr;
  for (Node* n = list.head; n != nullptr && out.size() < 100; n = n->next) {
    EXPECT_EQ(n->prev, before) << "at value " << n->value;
    out.push_back(n->value);
    before = n;
  }
  return out;
}

using V = std::vector<int>;

// Nodes 0..n-1 with garbage links, as recycled memory would have them.
std::vector<Node> make_nodes(int n) {
  std::vector<Node> nodes(n);
  for (int i = 0; i < n; i++) {
    nodes[i].value = i;
    nodes[i].prev = nodes[i].next = reinterpret_cast<Node*>(uintptr_t{0xdead0});
  }
  return nodes;
}

}  // namespace

TEST(DList, ANewListIsEmpty) {
  DList<Node> list;
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.head, nullptr);
  EXPECT_EQ(list.pop_front(), nullptr);
  EXPECT_TRUE(list.empty());
}

TEST(DList, PushFrontPutsTheNewestFirstAndLinksBothWays) {
  std::vector<Node> nodes = make_nodes(4);
  DList<Node> list;
  list.push_front(&nodes[0]);
  EXPECT_FALSE(list.empty());
  EXPECT_EQ(list.head, &nodes[0]);
  EXPECT_EQ(nodes[0].prev, nullptr);
  EXPECT_EQ(nodes[0].next, nullptr);
  for (int i = 1; i < 4; i++) list.push_front(&nodes[i]);
  EXPECT_EQ(values(list), (V{3, 2, 1, 0}));
}

TEST(DList, RemoveFromHeadMiddleAndTail) {
  std::vector<Node> nodes = make_nodes(5);
  DList<Node> list;
  for (int i = 0; i < 5; i++) list.push_front(&nodes[i]);  // 4 3 2 1 0
  list.remove(&nodes[4]);                                  // head
  EXPECT_EQ(values(list), (V{3, 2, 1, 0}));
  list.remove(&nodes[2]);  // middle
  EXPECT_EQ(values(list), (V{3, 1, 0}));
  list.remove(&nodes[0]);  // tail
  EXPECT_EQ(values(list), (V{3, 1}));
  EXPECT_EQ(list.pop_front()->value, 3);
  EXPECT_EQ(values(list), (V{1}));
  EXPECT_EQ(list.pop_front()->value, 1);
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.pop_front(), nullptr);
}

TEST(DList, RemoveAndPopFrontClearTheLinks) {
  std::vector<Node> nodes = make_nodes(4);
  DList<Node> list;
  for (int i = 0; i < 4; i++) list.push_front(&nodes[i]);  // 3 2 1 0
  for (int i : {3, 1, 0}) {                                // head, middle, tail
    list.remove(&nodes[i]);
    EXPECT_EQ(nodes[i].prev, nullptr) << i;
    EXPECT_EQ(nodes[i].next, nullptr) << i;
  }
  Node* last = list.pop_front();
  ASSERT_EQ(last, &nodes[2]);
  EXPECT_EQ(last->prev, nullptr);
  EXPECT_EQ(last->next, nullptr);
  EXPECT_TRUE(list.empty());
}

TEST(DList, RemovingTheOnlyNodeEmptiesTheList) {
  std::vector<Node> nodes = make_nodes(1);
  DList<Node> list;
  list.push_front(&nodes[0]);
  list.remove(&nodes[0]);
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.head, nullptr);
}

// A removed node can go on a list again (this one or another), and two
// lists over the same node type do not interfere.
TEST(DList, RemovedNodesCanBeListedAgain) {
  std::vector<Node> nodes = make_nodes(6);
  DList<Node> a, b;
  for (int i = 0; i < 6; i++) a.push_front(&nodes[i]);  // 5 4 3 2 1 0
  for (int i : {4, 2, 0}) {
    a.remove(&nodes[i]);
    b.push_front(&nodes[i]);
  }
  EXPECT_EQ(values(a), (V{5, 3, 1}));
  EXPECT_EQ(values(b), (V{0, 2, 4}));
  b.remove(&nodes[2]);
  a.push_front(&nodes[2]);
  EXPECT_EQ(values(a), (V{2, 5, 3, 1}));
  EXPECT_EQ(values(b), (V{0, 4}));
  std::vector<int> drained;
  while (Node* n = a.pop_front()) {
    drained.push_back(n->value);
    if (drained.size() > 4) break;  // pop_front handed a node out twice
  }
  EXPECT_EQ(drained, (V{2, 5, 3, 1}));
  EXPECT_TRUE(a.empty());
  EXPECT_FALSE(b.empty());
}
