// frontend/mail_sorter.cc — implementation of frontend/mail_sorter.h.
#include "frontend/mail_sorter.h"

#include <atomic>

#include "backend/huge_pages.h"
#include "backend/pagemap.h"
#include "ds/sizeclass.h"
#include "ds/slab_batch.h"
#include "frontend/checks.h"
#include "frontend/ownership.h"
#include "options.h"
#include "platform/memcheck.h"
#include "platform/os.h"

namespace roost::mail_sorter {

namespace {

// One slab's batches, chained through their queue links.
struct Group {
  ChunkMeta* slab;  // nullptr: the slot is free
  QueueNode* first;
  QueueNode* last;
  uint32_t objects;
  uint32_t batches;
};
static_assert(sizeof(Group) == 32);

// An open-addressing table of groups (linear probing, at most three
// quarters full) and the list of slots in use.  2 MiB of address space,
// reserved the first time; a sort touches only the pages its slabs hash
// to, and purges them when it is done.
constexpr unsigned kSlotBits = 16;
constexpr uint32_t kSlots = uint32_t{1} << kSlotBits;
constexpr uint32_t kMaxUsed = kSlots / 4 * 3;
constexpr size_t kTableBytes = size_t{kSlots} * sizeof(Group);
constexpr size_t kUsedBytes = size_t{kMaxUsed} * sizeof(uint32_t);
constexpr size_t kScratchBytes = kTableBytes + kUsedBytes;
static_assert(kScratchBytes % config::kMaxPageSize == 0);

Group* g_table = nullptr;
uint32_t* g_used = nullptr;

bool reserve_scratch() {
  if (g_table != nullptr) return true;
  void* p = os::reserve_aligned(kScratchBytes, config::kMinPageSize);
  if (p == nullptr) return false;
  // (Memcheck: objects' addresses, which a later block may take, are no
  // pointers of the program's.)
  memcheck::unaddressable(p, kScratchBytes);
  g_table = static_cast<Group*>(p);
  g_used = reinterpret_cast<uint32_t*>(static_cast<char*>(p) + kTableBytes);
  return true;
}

uint32_t slot_of(const ChunkMeta* m) {
  // Records are 64-byte lines: the bits above those, mixed.
  uint64_t h = (reinterpret_cast<uintptr_t>(m) >> 6) * 0x9e3779b97f4a7c15u;
  return static_cast<uint32_t>(h >> (64 - kSlotBits));
}

}  // namespace

Sorter::Sorter(const void* owner) : owner_(owner) {}

// Links are relaxed here: the service holds the inbox (its release hands
// them to the owner).
void Sorter::to_rest(QueueNode* first, QueueNode* last) {
  last->set_next(nullptr, std::memory_order_relaxed);
  if (result_.rest_last == nullptr)
    result_.rest_first = first;
  else
    result_.rest_last->set_next(first, std::memory_order_relaxed);
  result_.rest_last = last;
}

void Sorter::add(QueueNode* node) {
  ChunkMeta* m = pagemap::lookup(node);
  // Another allocator's batch (sent here to be forwarded) goes back as it
  // came: the owner forwards it when it receives.
  if (ownership::owner(m) != owner_) return to_rest(node, node);
  if (!reserve_scratch()) {
    result_.overflowed = true;
    return to_rest(node, node);
  }
  uint32_t i = slot_of(m);
  while (g_table[i].slab != nullptr && g_table[i].slab != m) i = (i + 1) & (kSlots - 1);
  Group& g = g_table[i];
  if (g.slab == nullptr) {
    // A slab the full table has no room for waits for the next sort.
    if (used_ == kMaxUsed) {
      result_.overflowed = true;
      return to_rest(node, node);
    }
    g = Group{m, nullptr, node, 0, 0};
    g_used[used_++] = i;
  }
  // Relaxed: the service holds the inbox, as in to_rest().
  node->set_next(g.first, std::memory_order_relaxed);
  g.first = node;
  checks::batch_word_intact(m, node);
  g.objects += slab_batch::open(node, m->obj_size).count;
  g.batches++;
}

Result Sorter::finish() {
  for (uint32_t u = 0; u < used_; u++) {
    Group& g = g_table[g_used[u]];
    ChunkMeta* m = g.slab;
    unsigned sc = m->sizeclass;
    if (g.objects == sizeclass::kInfo.info[sc].capacity) {
      // Every object of the slab is in this mail: none is anywhere else.
      // Handed back resident: purge_whole() purges it if it waits.
      if (result_.whole == nullptr) result_.whole_last = m;
      result_.whole = link_whole(m, result_.whole, 0);
      result_.whole_slabs++;
      result_.whole_batches += g.batches;
      result_.whole_objects += g.objects;
    } else {
      // Objects still out (or, past the capacity, a double free the owner
      // meets as it would have): returned as they came.
      to_rest(g.first, g.last);
    }
  }
  if (used_ != 0) {
    // Empty again (whatever the purge does), and holding no memory.
    for (uint32_t u = 0; u < used_; u++) g_table[g_used[u]].slab = nullptr;
    os::purge(g_table, kScratchBytes, true);
    used_ = 0;
  }
  return result_;
}

uint64_t purge_whole(ChunkMeta* whole) {
  bool zero = options::get(options::kPurgeZero) != 0;
  uint64_t bytes_purged = 0;
  for (ChunkMeta* m = whole; m != nullptr; m = next_whole(m)) {
    if ((whole_bits(m) & kPurged) != 0) continue;
    size_t bytes = sizeclass::slab_size(m->sizeclass);
    huge_pages::before_purge(m->base, bytes);
    bool purged = os::purge(reinterpret_cast<void*>(m->base), bytes, zero);
    // Marked purged even where the OS refused: the next look does not try
    // again (the owner restarts it as not zeroed).
    link_whole(m, next_whole(m), kPurged | (purged && zero ? kZeroed : 0));
    if (purged) bytes_purged += bytes;
  }
  return bytes_purged;
}

}  // namespace roost::mail_sorter
