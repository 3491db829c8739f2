// backend/zero_size.cc — implementation of backend/zero_size.h.
#include "backend/zero_size.h"

#include <atomic>
#include <new>

#include "backend/address_space.h"
#include "backend/chunk_meta.h"
#include "backend/meta_arena.h"
#include "backend/pagemap.h"
#include "config.h"
#include "ds/bits.h"
#include "ds/spinlock.h"
#include "platform/access_fault.h"
#include "platform/memcheck.h"
#include "platform/os.h"

namespace roost::zero_size {

namespace {

constexpr size_t kRange = config::kZeroSizeRangeBytes;
static_assert(bits::is_pow2(kRange) && kRange >= config::kGranule);
static_assert(config::kZeroSizeMaxAlign <= config::kGranule);

constexpr size_t kSteps = kRange / config::kMinAlloc;
constexpr size_t kBitmapBytes = kSteps / 8;
// Steps tried for a free one before giving up (the caller then allocates
// an object): all of them taken means a program holding millions of
// zero-size allocations at once.
constexpr unsigned kTries = 1024;

SpinLock g_lock;  // guards the range's set-up
std::atomic<uintptr_t> g_base{0};
std::atomic<bool> g_refused{false};  // the OS refused the range: never asked again
std::atomic<uint64_t> g_next{0};     // 16-byte steps handed out
// One bit per step, set while the address is allocated.
std::atomic<uint64_t>* g_live = nullptr;

ROOST_SLOW uintptr_t set_up() {
  LockGuard guard(g_lock);
  uintptr_t base = g_base.load(std::memory_order_acquire);
  if (base != 0 || g_refused.load(std::memory_order_relaxed)) return base;
  void* meta_mem = meta_arena::alloc(sizeof(ChunkMeta), alignof(ChunkMeta));
  void* bits_mem =
      meta_mem == nullptr ? nullptr : os::reserve_aligned(kBitmapBytes, config::kMinPageSize);
  void* p = bits_mem == nullptr ? nullptr : address_space::reserve_huge(kRange, config::kGranule);
  if (p == nullptr || !os::make_inaccessible(p, kRange)) {
    // What was had stays reserved (the metadata block with meta_arena):
    // nothing else can use it.
    g_refused.store(true, std::memory_order_relaxed);
    return 0;
  }
  // A read or write of one then ends in roost's diagnostic, not a bare
  // SIGSEGV.
  access_fault::arm();
  g_live = static_cast<std::atomic<uint64_t>*>(bits_mem);
  auto* m = new (meta_mem) ChunkMeta();
  set_kind(m, ChunkKind::kZeroSize);
  set_no_owner(m);
  m->base = reinterpret_cast<uintptr_t>(p);
  pagemap::set_range(m->base, kRange, m);
  g_base.store(m->base, std::memory_order_release);
  memcheck::unaddressable(&g_base, sizeof(g_base));  // (memcheck: as pagemap.cc's window start)
  return m->base;
}

}  // namespace

void* alloc(size_t align) {
  uintptr_t base = g_base.load(std::memory_order_acquire);
  if (ROOST_UNLIKELY(base == 0)) {
    if (g_refused.load(std::memory_order_relaxed)) return nullptr;
    base = set_up();
    if (base == 0) return nullptr;
  }
  size_t steps = align <= config::kMinAlloc ? 1 : align / config::kMinAlloc;
  for (unsigned i = 0; i < kTries; i++) {
    uint64_t n = g_next.fetch_add(steps, std::memory_order_relaxed);
    uintptr_t offset = bits::align_up((n * config::kMinAlloc) & (kRange - 1), align);
    if (offset >= kRange) offset = 0;
    size_t step = offset / config::kMinAlloc;
    uint64_t bit = uint64_t{1} << (step % 64);
    // A step still allocated from the last time round is skipped.
    if ((g_live[step / 64].fetch_or(bit, std::memory_order_relaxed) & bit) == 0)
      return reinterpret_cast<void*>(base + offset);
  }
  return nullptr;
}

bool free(const void* p) {
  size_t step =
      (reinterpret_cast<uintptr_t>(p) - g_base.load(std::memory_order_relaxed)) / config::kMinAlloc;
  uint64_t bit = uint64_t{1} << (step % 64);
  return (g_live[step / 64].fetch_and(~bit, std::memory_order_relaxed) & bit) != 0;
}

void lock_for_fork() { g_lock.lock(); }
void unlock_after_fork(bool child) { g_lock.unlock_after_fork(child); }

}  // namespace roost::zero_size
