// backend/meta_arena.cc — implementation of backend/meta_arena.h.
#include "backend/meta_arena.h"

#include <atomic>

#include "backend/address_space.h"
#include "ds/bits.h"
#include "ds/spinlock.h"
#include "platform/memcheck.h"
#include "platform/os.h"
#include "platform/text_section.h"

namespace roost::meta_arena {

namespace {
// Blocks are reserved lazily committed, each twice the last (from 1 MiB to
// 64 MiB), so that a small process holds little address space for its
// metadata; a block the OS refuses is asked for again at just the size
// needed.
constexpr size_t kFirstBlock = size_t{1} << 20;
constexpr size_t kMaxBlock = size_t{64} << 20;
SpinLock lock;
uintptr_t cursor = 0;
uintptr_t limit = 0;
size_t next_block = kFirstBlock;
std::atomic<size_t> reserved{0};  // written under the lock, read without it

void* reserve(size_t bytes) {
  void* fresh = os::reserve_aligned(bytes, 4096);
  if (fresh != nullptr) {
    reserved.fetch_add(bytes, std::memory_order_relaxed);
    // Memcheck's leak checker takes no record (a chunk's base is its first
    // object) for a pointer of the program's.
    memcheck::unaddressable(fresh, bytes);
  }
  return fresh;
}

void* reserve_block(size_t block) {
  void* fresh = reserve(block);
  if (fresh == nullptr) return nullptr;
  cursor = reinterpret_cast<uintptr_t>(fresh);
  limit = cursor + block;
  return fresh;
}
}  // namespace

ROOST_COMMON_TEXT void* alloc(size_t size, size_t align) {
  LockGuard guard(lock);
  uintptr_t p = bits::align_up(cursor, align);
  if (cursor == 0 || p + size > limit) {
    size_t needed = bits::align_up(size + align, 4096);
    // A request of a first block's size or more (a region's table) that the
    // current block cannot hold gets a block of its own, and the current
    // block goes on serving small ones: its rest is not left unused.
    if (cursor != 0 && needed >= kFirstBlock) {
      void* own = reserve(needed);
      return own != nullptr
                 ? reinterpret_cast<void*>(bits::align_up(reinterpret_cast<uintptr_t>(own), align))
                 : nullptr;
    }
    size_t block = needed > next_block ? bits::align_up(needed, kFirstBlock) : next_block;
    if (reserve_block(block) == nullptr && (block == needed || reserve_block(needed) == nullptr)) {
      if (reserved.load(std::memory_order_relaxed) == 0)
        address_space::report_cannot_start("its metadata", needed);
      return nullptr;
    }
    if (next_block < kMaxBlock) next_block *= 2;
    p = bits::align_up(cursor, align);
  }
  cursor = p + size;
  return reinterpret_cast<void*>(p);
}

size_t reserved_bytes() { return reserved.load(std::memory_order_relaxed); }

void lock_for_fork() { lock.lock(); }
void unlock_after_fork(bool child) { lock.unlock_after_fork(child); }

}  // namespace roost::meta_arena
