// Free lists (ds/freelist.h): push/pop order, and build() linking a run of
// objects in address order into an existing tail.
#include <gtest/gtest.h>

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
  freelist::set_next(tail, nullptr);
  FreeObject* head = freelist::build(reinterpret_cast<uintptr_t>(area), 48, 10, tail);
  for (int i = 0; i < 10; i++) {
    ASSERT_EQ(reinterpret_cast<char*>(head), area + 48 * i);
    head = freelist::next(head);
  }
  EXPECT_EQ(head, tail);
}
