// frontend/offload.cc — implementation of frontend/offload.h.
//
// A ring is a window [head, tail) of free-running 32-bit indices over a
// power-of-two slot array.  The producer writes a slot, then publishes it
// with a release store of its index; the consumer reads the producer's
// index with an acquire load, the slot, then publishes its own index.
// Each side keeps its last look at the other's index (the *_seen fields)
// and reads the shared one again only when that look says empty or full.
// The thread owns alloc_head and free_tail; the service side (whoever
// holds the offload lock: the service thread, or a thread trimming or
// exiting) owns alloc_tail and free_head.  Orders: each side loads its own
// index relaxed; it loads the other's with acquire (the producer's slot
// writes, or the consumer's slot reads, come before); it stores its own with
// release (its slot writes are seen, or its slot reads are done, before the
// other side reuses the slot).  Under the offload lock both ends are the
// holder's, and the lock orders them.
#include "frontend/offload.h"

#include <new>

#include "backend/meta_arena.h"
#include "config.h"
#include "ds/counter.h"
#include "ds/spinlock.h"
#include "frontend/checks.h"
#include "frontend/service.h"
#include "options.h"
#include "platform/text_section.h"

namespace roost::offload {

namespace {

constexpr unsigned kSlots = config::kOffloadRingSlots;
constexpr unsigned kFreeSlots = config::kOffloadFreeSlots;
static_assert(sizeclass::kCount <= 64, "a port's classes fit one 64-bit mask");

// Objects class sc's ring holds when full; 0 for a class not offloaded.
struct Targets {
  uint32_t of[sizeclass::kCount];
  constexpr Targets() : of() {
    for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
      size_t n = config::kOffloadRingBytes / sizeclass::kInfo.info[sc].size;
      of[sc] = static_cast<uint32_t>(n < kSlots ? n : kSlots);
    }
  }
};
constexpr Targets kTarget{};

}  // namespace

struct Port {
  // The thread's side.
  std::atomic<uint32_t> alloc_head[sizeclass::kCount];
  uint32_t alloc_seen[sizeclass::kCount];  // its last look at alloc_tail
  std::atomic<uint32_t> free_tail;
  uint32_t free_seen;  // its last look at free_head
  // Classes it found empty once: the service fills them.  Relaxed: the
  // thread calls service::want() after setting a bit, whose fence and the
  // service's idle handshake make it seen.
  std::atomic<uint64_t> active;
  uint64_t taken, missed;             // statistics (bump_counter)
  uint64_t given[sizeclass::kCount];  // its frees left on the free ring, by class (as taken)
  // The service's side.
  alignas(64) std::atomic<uint32_t> alloc_tail[sizeclass::kCount];
  std::atomic<uint32_t> free_head;
  Port* next;  // in the list of attached ports, or of spare ones
  alignas(64) void* alloc_slots[sizeclass::kCount][kSlots];
  void* free_slots[kFreeSlots];
};

namespace {

// Guards the lists, the service's allocator, and every ring's service side.
SpinLock g_lock;
// Set in the thread holding g_lock: service::start() must not run there.
__thread bool t_holding __attribute__((tls_model("initial-exec"))) = false;
Port* g_ports = nullptr;  // attached
Port* g_spare = nullptr;  // detached, for reuse
// The pool's (install()): set at start-up, before any port exists.
Backing g_backing{};
void* g_service_alloc = nullptr;
// Set (under g_lock) when a thread first gets a port; read unlocked, relaxed,
// to skip the lock in programs without offload.  A thread's first call for
// the service comes after it, through service::want()'s fence.
std::atomic<bool> g_any_port{false};
// Detached ports' statistics.
uint64_t g_retired_taken = 0, g_retired_missed = 0;
uint64_t g_retired_given[sizeclass::kCount] = {};
// The service allocator's counts for ring objects (ClassCorrection), by
// class: under g_lock.
uint64_t g_made[sizeclass::kCount] = {};
uint64_t g_unmade[sizeclass::kCount] = {};

void lock() {
  g_lock.lock();
  t_holding = true;
}
void unlock() {
  t_holding = false;
  g_lock.unlock();
}

class Held {
 public:
  Held() { lock(); }
  ~Held() { unlock(); }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
};

// The service's allocator, made the first time (under g_lock).
void* service_allocator() {
  if (g_service_alloc == nullptr) g_service_alloc = g_backing.acquire();
  return g_service_alloc;
}

// Carries out the frees on `port`'s free ring.
uint64_t collect(Port* port, void* s) {
  // free_head: relaxed, the service side's own; free_tail: acquire, pairing
  // with give()'s release (the slots it wrote are seen).
  uint32_t h = port->free_head.load(std::memory_order_relaxed);
  uint32_t t = port->free_tail.load(std::memory_order_acquire);
  for (uint32_t i = h; i != t; i++)
    g_unmade[g_backing.unmake(s, port->free_slots[i & (kFreeSlots - 1)])]++;
  // release: pairs with give()'s acquire of free_head (the slots are read before reuse).
  if (h != t) port->free_head.store(t, std::memory_order_release);
  return t - h;
}

// Tops up the rings of the classes `port`'s thread uses.
uint64_t fill(Port* port, void* s) {
  uint64_t moved = 0;
  // Relaxed: see Port::active (service::want()'s fence makes a new bit seen).
  for (uint64_t act = port->active.load(std::memory_order_relaxed); act != 0; act &= act - 1) {
    unsigned sc = static_cast<unsigned>(__builtin_ctzll(act));
    // alloc_tail: relaxed, the service side's own; alloc_head: acquire, pairing
    // with take()'s release (the thread read the slots before they are refilled).
    uint32_t t = port->alloc_tail[sc].load(std::memory_order_relaxed);
    uint32_t h = port->alloc_head[sc].load(std::memory_order_acquire);
    uint32_t start = t;
    while (t - h < kTarget.of[sc]) {
      void* p = g_backing.make(s, sc);
      if (p == nullptr) break;
      g_made[sc]++;
      port->alloc_slots[sc][t & (kSlots - 1)] = p;
      t++;
    }
    // release: pairs with take()'s acquire of alloc_tail (the slots' objects are seen).
    if (t != start) port->alloc_tail[sc].store(t, std::memory_order_release);
    moved += t - start;
  }
  return moved;
}

// Hands back everything on `port`'s alloc rings (the caller is the port's
// thread: the rings' consumer) and stops filling them.
void empty_alloc_rings(Port* port, void* s) {
  // Relaxed, all: the caller also holds the offload lock (detach, trim), which
  // orders both ends of every ring, and active, against the service's passes.
  port->active.store(0, std::memory_order_relaxed);
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) {
    uint32_t h = port->alloc_head[sc].load(std::memory_order_relaxed);
    uint32_t t = port->alloc_tail[sc].load(std::memory_order_relaxed);
    for (uint32_t i = h; i != t; i++) {
      g_backing.unmake(s, port->alloc_slots[sc][i & (kSlots - 1)]);
      g_unmade[sc]++;
    }
    port->alloc_head[sc].store(t, std::memory_order_relaxed);  // relaxed: the lock, above
    port->alloc_seen[sc] = t;
  }
}

// Under the offload lock: counts only.  The service side's indices relaxed
// (its own), active as Port::active says; the thread's indices acquire, as
// the passes read them (pairing with take()'s and give()'s releases).
bool port_pending(const Port* port) {
  if (port->free_head.load(std::memory_order_relaxed) !=
      port->free_tail.load(std::memory_order_acquire))
    return true;
  for (uint64_t act = port->active.load(std::memory_order_relaxed); act != 0; act &= act - 1) {
    unsigned sc = static_cast<unsigned>(__builtin_ctzll(act));
    uint32_t level = port->alloc_tail[sc].load(std::memory_order_relaxed) -
                     port->alloc_head[sc].load(std::memory_order_acquire);
    if (level < kTarget.of[sc]) return true;
  }
  return false;
}

ROOST_SLOW void miss(Port* port, unsigned sc) {
  uint64_t bit = uint64_t{1} << sc;
  // Relaxed, both: service::want() below fences them for fill() (see Port::active).
  if ((port->active.load(std::memory_order_relaxed) & bit) == 0)
    port->active.fetch_or(bit, std::memory_order_relaxed);
  bump_counter(port->missed);
  service::want();
}

}  // namespace

ROOST_COMMON_TEXT bool enabled() {
  return options::get(options::kOffload) != 0 && options::get(options::kService) != 0;
}

ROOST_COMMON_TEXT bool held_here() { return t_holding; }

ROOST_COMMON_TEXT void install(const Backing& backing) { g_backing = backing; }

ROOST_COMMON_TEXT Port* attach() {
  if (!enabled()) return nullptr;
  Port* port;
  {
    Held held;
    port = g_spare;
    if (port != nullptr) {
      g_spare = port->next;
    } else {
      void* mem = meta_arena::alloc(sizeof(Port), alignof(Port));
      if (mem == nullptr) return nullptr;
      port = new (mem) Port();
    }
    port->taken = port->missed = 0;
    for (uint64_t& given : port->given) given = 0;
    port->next = g_ports;
    g_ports = port;
    // Relaxed: see g_any_port (read unlocked as a hint; want()'s fence orders it).
    g_any_port.store(true, std::memory_order_relaxed);
  }
  return port;
}

ROOST_COMMON_TEXT void detach(Port* port) {
  if (port == nullptr) return;
  Held held;
  Port** link = &g_ports;
  while (*link != port) link = &(*link)->next;
  *link = port->next;
  if (void* s = service_allocator()) {
    empty_alloc_rings(port, s);
    collect(port, s);
  }
  g_retired_taken += port->taken;
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++) g_retired_given[sc] += port->given[sc];
  g_retired_missed += port->missed;
  port->next = g_spare;
  g_spare = port;
}

void* take(Port* port, unsigned sc) {
  if (kTarget.of[sc] == 0) return nullptr;
  uint32_t h = port->alloc_head[sc].load(std::memory_order_relaxed);  // relaxed: our own
  if (h == port->alloc_seen[sc]) {
    // acquire: pairs with fill()'s release of alloc_tail (the slot's object is seen).
    uint32_t t = port->alloc_tail[sc].load(std::memory_order_acquire);
    port->alloc_seen[sc] = t;
    if (h == t) {
      miss(port, sc);
      return nullptr;
    }
  }
  void* p = port->alloc_slots[sc][h & (kSlots - 1)];
  // release: pairs with fill()'s acquire of alloc_head (the slot is read before it is refilled).
  port->alloc_head[sc].store(h + 1, std::memory_order_release);
  checks::parked_intact(sc, p);
  bump_counter(port->taken);
  // What it last saw is used up: the service is asked for more now, not
  // when the ring is found empty.
  if (h + 1 == port->alloc_seen[sc]) service::want();
  return p;
}

bool give(Port* port, void* p, unsigned sc) {
  uint32_t t = port->free_tail.load(std::memory_order_relaxed);  // relaxed: our own
  if (t - port->free_seen == kFreeSlots) {
    // acquire: pairs with collect()'s release of free_head (its slot reads are done).
    port->free_seen = port->free_head.load(std::memory_order_acquire);
    if (t - port->free_seen == kFreeSlots) {
      bump_counter(port->missed);
      service::want();
      return false;
    }
  }
  port->free_slots[t & (kFreeSlots - 1)] = p;
  // release: pairs with collect()'s acquire of free_tail (the slot written above is seen).
  port->free_tail.store(t + 1, std::memory_order_release);
  bump_counter(port->given[sc]);
  if (t + 1 - port->free_seen == kFreeSlots / 2) service::want();
  return true;
}

ROOST_COMMON_TEXT uint64_t serve() {
  // Relaxed: see g_any_port (after the idle handshake's fences a new port's store is seen).
  if (!g_any_port.load(std::memory_order_relaxed)) return 0;
  Held held;
  void* s = service_allocator();
  if (s == nullptr) return 0;
  uint64_t moved = 0;
  for (Port* port = g_ports; port != nullptr; port = port->next) {
    moved += collect(port, s);
    moved += fill(port, s);
  }
  // Frees of its objects that came back as mail (a thread's free ring was
  // full); when there was nothing else to do, its outbox goes home too.
  if (moved == 0)
    g_backing.settle(s);
  else
    g_backing.visit_inbox(s);
  return moved;
}

ROOST_COMMON_TEXT bool pending() {
  // Relaxed: read behind sleep_until()'s fence, which pairs with want()'s (see g_any_port).
  if (!g_any_port.load(std::memory_order_relaxed)) return false;
  Held held;
  if (g_service_alloc != nullptr && g_backing.has_mail(g_service_alloc)) return true;
  for (Port* port = g_ports; port != nullptr; port = port->next)
    if (port_pending(port)) return true;
  return false;
}

void trim(Port* self) {
  // Relaxed: a caller with a port set it itself; other threads' ports are a best effort.
  if (!g_any_port.load(std::memory_order_relaxed)) return;
  Held held;
  void* s = service_allocator();
  if (s == nullptr) return;
  if (self != nullptr) empty_alloc_rings(self, s);
  for (Port* port = g_ports; port != nullptr; port = port->next) collect(port, s);
  // Its outbox goes home now, for the pool's settling to deliver; it lets go
  // of what it does not use in settle_service(), which comes after.
  g_backing.settle(s);
}

uint64_t settle_service() {
  // Relaxed: a hint, as in trim().
  if (!g_any_port.load(std::memory_order_relaxed)) return 0;
  Held held;
  if (g_service_alloc == nullptr) return 0;
  uint64_t received = g_backing.settle(g_service_alloc);
  g_backing.release_unused(g_service_alloc);
  return received;
}

// Relaxed: statistics (a stale false reads no ring counters).
Still::Still() : held_(g_any_port.load(std::memory_order_relaxed)) {
  if (held_) lock();
}

Still::~Still() {
  if (held_) unlock();
}

Counters Still::counters() const {
  if (!held_) return {};
  Counters c = {g_retired_taken, 0, g_retired_missed, 0};
  for (uint64_t given : g_retired_given) c.ring_frees += given;
  for (Port* port = g_ports; port != nullptr; port = port->next) {
    c.ring_allocs += read_counter(port->taken);
    for (const uint64_t& given : port->given) c.ring_frees += read_counter(given);
    c.ring_misses += read_counter(port->missed);
    c.ports++;
  }
  return c;
}

ClassCorrection Still::correction(unsigned sc) const {
  if (!held_) return {};
  ClassCorrection k = {g_made[sc], g_unmade[sc], g_retired_given[sc]};
  for (Port* port = g_ports; port != nullptr; port = port->next)
    k.given += read_counter(port->given[sc]);
  return k;
}

void lock_for_fork() { g_lock.lock(); }
void unlock_after_fork(bool child) { g_lock.unlock_after_fork(child); }

}  // namespace roost::offload
