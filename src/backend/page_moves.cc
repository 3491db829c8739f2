// backend/page_moves.cc — implementation of backend/page_moves.h, and of
// chunks::move() and chunks::moved_bytes() (backend/chunk_allocator.h).
//
// Owns: moving the resident pages of released chunks (the donors, in
// transit while they move) into a big chunk just handed out, up to what its
// caller will use: the kernel moves page tables, no byte is copied and no
// page faulted in.  In the residency model (docs/DESIGN.md, rule 7) a move
// turns bytes on their way out into bytes in use: it adds no resident byte.
// Must never: move under the backend's lock (only the purge lock is held,
// so fork and malloc_trim wait for the donors), move a chunk's end guard,
// or move a donor whose pages are mostly gone (worth_moving).
#include "backend/page_moves.h"

#include <atomic>

#include "backend/chunk_allocator.h"
#include "backend/chunk_internal.h"
#include "backend/huge_pages.h"
#include "backend/residency.h"
#include "ds/bits.h"
#include "ds/dlist.h"
#include "ds/spinlock.h"
#include "platform/os.h"

namespace roost::chunks {

namespace {

constexpr size_t kMoveUnit = size_t{1} << config::kMoveBits;
std::atomic<size_t> g_moved{0};  // bytes moved since start (move()); relaxed: a figure

// The moves planned for one chunk: from each donor (a dirty chunk in
// transit) the last `bytes` of its dirty extent rounded up to kMoveUnit,
// after which it keeps `kept_pages` pages of that extent.
struct Moves {
  ChunkMeta* donor[config::kMaxMovesPerChunk];
  uintptr_t from[config::kMaxMovesPerChunk];
  size_t bytes[config::kMaxMovesPerChunk];
  uint32_t kept_pages[config::kMaxMovesPerChunk];
  unsigned count = 0;
  uintptr_t to = 0;  // where the first goes; each next one follows the last that moved
};

// Plans a move of the last `n` bytes (n <= whole) of the rounded extent
// (`whole`, inside `d`) of the dirty chunk `d`, taken off `list`.
void plan_move(Moves* moves, DList<ChunkMeta>& list, ChunkMeta* d, size_t whole, size_t n) {
  list.remove(d);
  size_t extent = dirty_extent(d);
  into_transit(d, nullptr);
  unsigned i = moves->count++;
  moves->donor[i] = d;
  moves->from[i] = d->base + whole - n;
  moves->bytes[i] = n;
  size_t kept = whole - n < extent ? whole - n : extent;
  moves->kept_pages[i] = static_cast<uint32_t>(kept >> config::kMinPageBits);
}

// Lock held: plans moves into `m` (just taken) from its dirty extent
// (rounded up to kMoveUnit) up to `fill` bytes, from dirty chunks of
// kMoveUnit and up, the biggest first (the old generation's before the
// young one's: they are nearer their purge), each moved whole where its
// dirty extent fits what is left to fill (what a program wrote of a buffer
// lies at its head, and lands at the head of what it fills); what no whole
// one fills takes the tail of the smallest extent seen that does not fit.
// Takes the donors off their lists.
void plan_moves(ChunkMeta* m, size_t fill, Moves* moves) {
  size_t size = size_t{1} << m->order;
  size_t at = bits::align_up(dirty_extent(m), kMoveUnit);
  size_t want = bits::align_up(fill < size ? fill : size, kMoveUnit);
  // A move replaces the pages it lands on: not the chunk's end guard.
  if (has_end_guard(m) && want > size - kMoveUnit) want = size - kMoveUnit;
  if (want < at) want = at;
  moves->to = m->base + at;
  unsigned looked = 0;
  ChunkMeta* too_big = nullptr;  // the smallest extent seen that does not fit, and its list
  DList<ChunkMeta>* too_big_list = nullptr;
  for (unsigned o = kMaxOrder + 1; o-- > config::kMoveBits;) {
    for (Generation gen : {Generation::kOld, Generation::kYoung}) {
      DList<ChunkMeta>& list = dirty_list(gen, o);
      for (ChunkMeta *d = list.head, *next; d != nullptr; d = next) {
        if (at == want || moves->count == config::kMaxMovesPerChunk ||
            looked++ == config::kMaxMoveLooks)
          goto done;
        next = d->next;
        if (has_end_guard(d)) continue;  // (a move would take its guard page along)
        size_t whole = bits::align_up(dirty_extent(d), kMoveUnit);  // inside d
        if (whole <= want - at) {
          plan_move(moves, list, d, whole, whole);
          at += whole;
        } else if (too_big == nullptr || dirty_extent(d) < dirty_extent(too_big)) {
          too_big = d;
          too_big_list = &list;
        }
      }
    }
  }
done:
  // (It did not fit when seen, and what is left has only shrunk: n < whole.)
  if (at < want && too_big != nullptr && moves->count < config::kMaxMovesPerChunk) {
    size_t whole = bits::align_up(dirty_extent(too_big), kMoveUnit);
    plan_move(moves, *too_big_list, too_big, whole, whole < want - at ? whole : want - at);
  }
}

// Whether the bytes [from, from + n) of the dirty chunk `d` are worth
// moving: its pages at config::kMoveResidentProbes points through the part
// of them in its dirty extent (each in the middle of its share) are
// resident.  A program that wrote only a buffer's head and tail leaves a
// long extent of which little is resident; moving it would only pin its
// head, far from the head of what it fills.
bool worth_moving(const ChunkMeta* d, uintptr_t from, size_t n) {
  uintptr_t end = d->base + dirty_extent(d);
  if (from + n < end) end = from + n;
  if (end <= from) return false;
  const size_t page = os::page_size();
  constexpr size_t kParts = 2 * config::kMoveResidentProbes;  // probes at the odd ones
  for (size_t k = 1; k < kParts; k += 2) {
    uintptr_t at = (from + (end - from) / kParts * k) & ~(page - 1);
    if (!os::resident(reinterpret_cast<const void*>(at))) return false;
  }
  return true;
}

// Carries out `moves` into `m` with only the purge lock held (which keeps
// fork and malloc_trim waiting while the donors are in transit), then puts
// the donors back (dirty with what they kept, or clean) and sets `m`'s
// dirty extent.  The first move the OS refuses ends the moves (a donor
// moved in part keeps its whole extent).
// Returns `m`, or nullptr when a failed move took part of it from roost:
// the chunk is lost, and the caller takes another.
ChunkMeta* carry_out(ChunkMeta* m, Moves* moves) {
  uintptr_t to = moves->to;
  size_t moved = 0;
  os::Moved r = os::Moved::kMoved;
  for (unsigned i = 0; i < moves->count && r == os::Moved::kMoved; i++) {
    size_t n = moves->bytes[i];
    if (!worth_moving(moves->donor[i], moves->from[i], n)) continue;
    size_t done = move(moves->from[i], to, n, &r);
    to += done;
    moved += done;
    if (done == n) moves->donor[i]->dirty_pages = moves->kept_pages[i];
  }
  // Up to `to`, m may hold old bytes.
  if (moved != 0) m->dirty_pages = static_cast<uint32_t>((to - m->base) >> config::kMinPageBits);
  LockGuard guard(g_lock);
  for (unsigned i = 0; i < moves->count; i++) {
    ChunkMeta* d = moves->donor[i];
    if (d->dirty_pages == 0)
      merge_free(d);
    else
      merge_dirty(d);
  }
  note_moved_in(moved);
  if (r != os::Moved::kLost) return m;
  lose(m);
  return nullptr;
}

}  // namespace

ChunkMeta* take_filled(unsigned order, size_t fill) {
  if (!g_purge_lock.try_lock()) return take(order, kMaxOrder, true);
  Moves moves;
  ChunkMeta* m;
  {
    uint64_t now = os::now_ns();
    LockGuard guard(g_lock);
    decay_locked(now);
    m = take_locked(order, kMaxOrder, true, fill);
    if (m != nullptr && dirty_extent(m) < fill) plan_moves(m, fill, &moves);
  }
  if (m != nullptr && moves.count != 0) m = carry_out(m, &moves);
  g_purge_lock.unlock();
  return m != nullptr ? m : take(order, kMaxOrder, true);
}

size_t move(uintptr_t from, uintptr_t to, size_t bytes, os::Moved* result) {
  size_t done = 0;
  *result = os::Moved::kMoved;
  while (done < bytes) {
    *result = os::move_pages(reinterpret_cast<void*>(from + done),
                             reinterpret_cast<void*>(to + done), kMoveUnit);
    if (*result != os::Moved::kMoved) break;
    huge_pages::moved(from + done, to + done, kMoveUnit);
    done += kMoveUnit;
  }
  g_moved.fetch_add(done, std::memory_order_relaxed);  // relaxed: a figure (above)
  return done;
}

size_t moved_bytes() { return g_moved.load(std::memory_order_relaxed); }  // relaxed: a figure

}  // namespace roost::chunks
