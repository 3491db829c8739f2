// tests/unit/unbound_allocator.h — an Allocator that no thread is bound
// to, for tests that drive its components' rules step by step, and a way
// to empty one of its fast lists so that its next allocation refills.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/pagemap.h"
#include "ds/freelist.h"
#include "frontend/allocator.h"
#include "frontend/checks.h"

namespace roost::test {

inline std::unique_ptr<Allocator> unbound_allocator(uint32_t id) {
  EXPECT_TRUE(pagemap::init());
  auto a = std::make_unique<Allocator>(id);
  a->attach();
  return a;
}

// Takes everything on class `sc`'s fast list (so that it holds none),
// returning it handed out (its free marks wiped).
inline std::vector<void*> take_fast_list(Allocator& a, unsigned sc) {
  std::vector<void*> v;
  FreeObject** head = a.fast_slot(sc);
  for (FreeObject* p = *head; p != nullptr; p = freelist::next(p)) v.push_back(p);
  for (void* p : v) checks::note_handed_out(p);
  *head = nullptr;
  return v;
}

}  // namespace roost::test
