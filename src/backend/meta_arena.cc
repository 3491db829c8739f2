// backend/meta_arena.cc — implementation of backend/meta_arena.h.
#include "backend/meta_arena.h"

#include <atomic>

#include "ds/bits.h"
#include "ds/spinlock.h"
#include "platform/os.h"

namespace roost::meta_arena {

namespace {
constexpr size_t kBlock = size_t{64} << 20;  // lazily committed
SpinLock lock;
uintptr_t cursor = 0;
uintptr_t limit = 0;
std::atomic<size_t> reserved{0};  // written under the lock, read without it
}  // namespace

void* alloc(size_t size, size_t align) {
  LockGuard guard(lock);
  uintptr_t p = bits::align_up(cursor, align);
  if (cursor == 0 || p + size > limit) {
    size_t block = size + align > kBlock ? bits::align_up(size + align, kBlock) : kBlock;
    void* fresh = os::reserve_aligned(block, 4096);
    if (fresh == nullptr) return nullptr;
    reserved.fetch_add(block, std::memory_order_relaxed);
    cursor = reinterpret_cast<uintptr_t>(fresh);
    limit = cursor + block;
    p = bits::align_up(cursor, align);
  }
  cursor = p + size;
  return reinterpret_cast<void*>(p);
}

size_t reserved_bytes() { return reserved.load(std::memory_order_relaxed); }

void lock_for_fork() { lock.lock(); }
void unlock_after_fork(bool child) { lock.unlock_after_fork(child); }

}  // namespace roost::meta_arena
