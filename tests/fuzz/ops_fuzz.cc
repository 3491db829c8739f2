// tests/fuzz/ops_fuzz.cc — libFuzzer harness: each input is a sequence of
// heap operations that two threads carry out on roost (linked in as malloc &
// co.: libroost.a or libroost-secure.a), checked against a shadow model.
// The operations: malloc, calloc, realloc (sizes 0 to about 1 MiB, most of
// them small), aligned_alloc (alignments 16 B to 64 KiB, sizes multiples of
// them), free, free_sized / free_aligned_sized, a check of the contents,
// malloc_trim, objects allocated by one thread and freed at once by the
// other, and a restart of the worker thread; each on one slot or a range.
//
// The input drives which thread does what.  The calling thread (the
// "dispatcher") decodes the operations and runs its own; the other thread
// (the "worker", long-lived, restarted when an input says so) runs its
// operations from a small lock-protected queue.  Every object sits in one of
// kSlots slots and belongs to one thread at a time: an operation on a slot
// the other thread holds moves the slot first (to the worker: through the
// queue; to the dispatcher: after the worker has drained its queue), so a
// free, free_sized or realloc by the thread that did not allocate the object
// is a remote free, the heart of roost's design.
//
// The shadow model keeps each object's requested size, alignment and a fill
// pattern derived from (object id, byte index).  Every free, realloc and
// check verifies the contents (realloc: the old prefix kept), the alignment
// and malloc_usable_size(p) >= size; calloc's memory must read zero.  A
// mismatch writes one line to stderr and traps, which libFuzzer records as a
// crash.
//
// Owns: the input's decoding into operations, the two threads, the shadow
// model.  Must never: leave an object allocated when an input's run returns
// (roost would grow across inputs), exceed kMaxOps operations, kMaxLiveBytes
// live bytes or about kMaxWorkBytes of filling and checking per input, or
// misuse the heap itself (the misuse harness is misuse_fuzz.cc).
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

#include "input_reader.h"
#include "roost.h"

extern "C" void free_sized(void* p, size_t size);
extern "C" void free_aligned_sized(void* p, size_t align, size_t size);

namespace {

constexpr size_t kSlots = 128;
constexpr size_t kMaxOps = 1024;
constexpr size_t kMaxRange = 32;  // slots one operation covers (Op::acts_on's bits)
constexpr size_t kMaxLiveBytes = size_t{64} << 20;
// Bytes filled, copied or checked per input, roughly: decoding stops there.
constexpr size_t kMaxWorkBytes = size_t{256} << 20;
constexpr size_t kMaxWorkerRestarts = 4;
constexpr size_t kMinAlign = 16;  // roost's alignment for every object

[[noreturn]] void fail(const char* what, size_t slot, const void* p, size_t a, size_t b) {
  fprintf(stderr, "ops_fuzz: %s (slot %zu, object %p, %zu vs %zu)\n", what, slot, p, a, b);
  __builtin_trap();
}

// ---- the fill pattern: byte j of object `id` is byte j % 8 of word j / 8 ----

uint64_t pattern_word(uint64_t id, uint64_t word_index) {
  uint64_t x = id * 0x9e3779b97f4a7c15u + word_index * 0xd6e8feb86659fd93u + 1;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9u;
  return x ^ (x >> 32);
}

unsigned char pattern_byte(uint64_t id, size_t j) {
  return static_cast<unsigned char>(pattern_word(id, j / 8) >> (8 * (j % 8)));
}

void fill_pattern(unsigned char* p, size_t begin, size_t end, uint64_t id) {
  size_t j = begin;
  for (; j < end && j % 8 != 0; j++) p[j] = pattern_byte(id, j);
  for (; j + 8 <= end; j += 8) {
    uint64_t w = pattern_word(id, j / 8);
    memcpy(p + j, &w, 8);
  }
  for (; j < end; j++) p[j] = pattern_byte(id, j);
}

// The first byte in [begin, end) that is not the pattern's, or `end`.
size_t first_pattern_mismatch(const unsigned char* p, size_t begin, size_t end, uint64_t id) {
  size_t j = begin;
  for (; j < end && j % 8 != 0; j++)
    if (p[j] != pattern_byte(id, j)) return j;
  for (; j + 8 <= end; j += 8) {
    uint64_t w;
    memcpy(&w, p + j, 8);
    if (w != pattern_word(id, j / 8)) break;
  }
  for (; j < end; j++)
    if (p[j] != pattern_byte(id, j)) return j;
  return end;
}

// ---- the shadow model ----

// How an object was made: which free_sized variant may free it.
enum class Origin : uint8_t { kMalloc, kAligned };

struct ShadowObject {
  unsigned char* ptr = nullptr;
  size_t size = 0;
  size_t align = kMinAlign;
  uint64_t id = 0;
  Origin origin = Origin::kMalloc;
  bool made_by_worker = false;
};

// What the run did, printed when it ends (print_tally()).
thread_local bool t_on_worker = false;
std::atomic<uint64_t> g_objects_made{0};
std::atomic<uint64_t> g_freed_by_other_thread{0};
uint64_t g_inputs = 0;

// Touched only by the thread that holds the slot (see the file comment).
ShadowObject g_objects[kSlots];

void verify(size_t slot) {
  const ShadowObject& o = g_objects[slot];
  if (reinterpret_cast<uintptr_t>(o.ptr) % o.align != 0)
    fail("misaligned object", slot, o.ptr, reinterpret_cast<uintptr_t>(o.ptr) % o.align, o.align);
  size_t usable = malloc_usable_size(o.ptr);
  if (usable < o.size)
    fail("malloc_usable_size below the size asked for", slot, o.ptr, usable, o.size);
  size_t bad = first_pattern_mismatch(o.ptr, 0, o.size, o.id);
  if (bad != o.size) fail("object contents changed", slot, o.ptr, bad, o.size);
}

// A new object in `slot`: checked and filled.
void adopt(size_t slot, void* p, size_t size, size_t align, uint64_t id, Origin origin,
           bool zeroed) {
  if (p == nullptr) fail("allocation failed", slot, p, size, align);
  ShadowObject& o = g_objects[slot];
  o = ShadowObject{static_cast<unsigned char*>(p), size, align, id, origin, t_on_worker};
  g_objects_made.fetch_add(1, std::memory_order_relaxed);
  if (zeroed) {
    for (size_t j = 0; j < size; j++)
      if (o.ptr[j] != 0) fail("calloc memory not zero", slot, p, j, size);
  }
  fill_pattern(o.ptr, 0, size, id);
  verify(slot);
}

// ---- operations ----

enum class OpKind : uint8_t {
  kMalloc,
  kCalloc,
  kAlignedAlloc,
  kFree,
  kFreeSized,
  kRealloc,
  kCheck,
  kTrim,
};

// One operation over the slots first + i for each bit i of `acts_on` (the
// dispatcher leaves out full slots for allocations and empty ones for frees
// and checks, and gives the op only slots its thread holds).
struct Op {
  OpKind kind = OpKind::kCheck;
  uint16_t first = 0;
  uint16_t count = 1;
  uint32_t acts_on = 0;
  size_t size = 0;
  size_t align = kMinAlign;
  size_t calloc_elem = 1;
  uint64_t id = 0;  // the first new object's id; each further one +1
};

void release(size_t slot, bool sized) {
  ShadowObject& o = g_objects[slot];
  verify(slot);
  if (o.made_by_worker != t_on_worker)
    g_freed_by_other_thread.fetch_add(1, std::memory_order_relaxed);
  if (!sized)
    free(o.ptr);
  else if (o.origin == Origin::kAligned)
    free_aligned_sized(o.ptr, o.align, o.size);
  else
    free_sized(o.ptr, o.size);
  o = ShadowObject{};
}

void resize(size_t slot, size_t new_size, uint64_t new_id) {
  ShadowObject& o = g_objects[slot];
  if (o.ptr == nullptr) {
    adopt(slot, realloc(nullptr, new_size), new_size, kMinAlign, new_id, Origin::kMalloc, false);
    return;
  }
  verify(slot);
  void* q = realloc(o.ptr, new_size);
  if (new_size == 0) {  // glibc's rule, which roost follows: freed, NULL
    if (q != nullptr) fail("realloc(p, 0) did not return NULL", slot, q, 0, o.size);
    o = ShadowObject{};
    return;
  }
  if (q == nullptr) fail("realloc failed", slot, o.ptr, new_size, o.size);
  size_t kept = o.size < new_size ? o.size : new_size;
  o.ptr = static_cast<unsigned char*>(q);
  o.align = kMinAlign;
  o.origin = Origin::kMalloc;
  size_t bad = first_pattern_mismatch(o.ptr, 0, kept, o.id);
  if (bad != kept) fail("realloc lost the old contents", slot, q, bad, kept);
  if (new_size > o.size) fill_pattern(o.ptr, o.size, new_size, o.id);
  o.size = new_size;
  verify(slot);
}

// Runs `op` on the calling thread, which holds the slots it acts on.
void execute(const Op& op) {
  if (op.kind == OpKind::kTrim) {
    malloc_trim(0);
    return;
  }
  uint64_t id = op.id;
  for (size_t i = 0; i < op.count; i++) {
    if ((op.acts_on >> i & 1) == 0) continue;
    size_t slot = op.first + i;
    ShadowObject& o = g_objects[slot];
    bool allocates = op.kind == OpKind::kMalloc || op.kind == OpKind::kCalloc ||
                     op.kind == OpKind::kAlignedAlloc;
    bool frees =
        op.kind == OpKind::kFree || op.kind == OpKind::kFreeSized || op.kind == OpKind::kCheck;
    if ((allocates && o.ptr != nullptr) || (frees && o.ptr == nullptr))
      fail("the harness's slot map disagrees with its objects", slot, o.ptr, 0, 0);
    switch (op.kind) {
      case OpKind::kMalloc:
        adopt(slot, malloc(op.size), op.size, kMinAlign, id++, Origin::kMalloc, false);
        break;
      case OpKind::kCalloc:
        adopt(slot, calloc(op.size / op.calloc_elem, op.calloc_elem), op.size, kMinAlign, id++,
              Origin::kMalloc, true);
        break;
      case OpKind::kAlignedAlloc:
        adopt(slot, aligned_alloc(op.align, op.size), op.size, op.align, id++, Origin::kAligned,
              false);
        break;
      case OpKind::kFree:
        release(slot, false);
        break;
      case OpKind::kFreeSized:
        release(slot, true);
        break;
      case OpKind::kRealloc:
        resize(slot, op.size, id++);
        break;
      case OpKind::kCheck:
        verify(slot);
        break;
      case OpKind::kTrim:
        break;
    }
  }
}

// ---- the worker thread ----

class Worker {
 public:
  Worker() : thread_([this] { run(); }) {}

  // Queues `op` for the worker (waits while the queue is full).
  void post(const Op& op) {
    std::unique_lock<std::mutex> lock(mutex_);
    room_.wait(lock, [this] { return queued_ < kQueueSize; });
    queue_[(head_ + queued_) % kQueueSize] = op;
    queued_++;
    work_.notify_one();
  }

  // Returns once the worker has carried out everything posted: what it
  // wrote is then visible to the caller.
  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queued_ == 0 && !busy_; });
  }

  // The worker exits (roost parks its allocator); joined here.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      work_.notify_one();
    }
    thread_.join();
  }

 private:
  static constexpr size_t kQueueSize = 64;

  void run() {
    t_on_worker = true;
    for (;;) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_.wait(lock, [this] { return queued_ > 0 || stopping_; });
        if (queued_ == 0) return;  // stopping, nothing left
        op = queue_[head_];
        head_ = (head_ + 1) % kQueueSize;
        queued_--;
        busy_ = true;
        room_.notify_one();
      }
      execute(op);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
        if (queued_ == 0) idle_.notify_all();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable work_, room_, idle_;
  Op queue_[kQueueSize];
  size_t head_ = 0;
  size_t queued_ = 0;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is constructed
};

// Never destroyed: a joinable std::thread at exit would terminate().
Worker* g_worker = nullptr;

// ---- decoding the input ----

using roost_fuzz::InputReader;

// Sizes from 0 to a little over 1 MiB, most of them small.
size_t decode_size(InputReader& in) {
  uint8_t scale = in.u8();
  switch (scale % 8) {
    case 0:
    case 1:
    case 2:
      return in.u8() % 129;
    case 3:
      return in.u16() % 1025;
    case 4:
      return in.u16() % 8193;
    case 5:
      return in.u16() % 65537;
    case 6:  // around the small/large boundary (256 KiB)
      return (size_t{256} << 10) - 16384 + in.u16() % 32768;
    default:
      return in.u24() % ((size_t{1} << 20) + 4097);
  }
}

enum class Holder : uint8_t { kDispatcher, kWorker };

// The dispatcher's view of the slots: whether each holds an object, its
// size (for the live-bytes bound), and the thread that last acted on it,
// which holds it (an empty slot too: the worker may not have freed it yet);
// the objects themselves are the holders'.
struct SlotMap {
  bool full[kSlots] = {};
  Holder holder[kSlots] = {};
  size_t bytes[kSlots] = {};
  size_t live_bytes = 0;

  void set(size_t slot, Holder by, bool is_full, size_t size) {
    live_bytes = live_bytes - bytes[slot] + size;
    full[slot] = is_full;
    holder[slot] = by;
    bytes[slot] = size;
  }
};

class Dispatcher {
 public:
  void run(InputReader& in) {
    uint64_t next_id = uint64_t{++inputs_} << 32;
    size_t restarts = 0;
    for (size_t n = 0; n < kMaxOps && !in.empty() && work_bytes_ < kMaxWorkBytes; n++) {
      uint8_t head = in.u8();
      bool on_worker = head & 0x80;
      Op op;
      op.first = in.u8() % kSlots;
      op.count = 1;
      if (head & 0x40) op.count = 1 + in.u8() % kMaxRange;
      if (op.first + op.count > kSlots) op.count = kSlots - op.first;
      op.id = next_id;
      next_id += op.count;
      switch (head & 0x0f) {
        case 0:
        case 1:
        case 2:
          op.kind = OpKind::kMalloc;
          op.size = decode_size(in);
          break;
        case 3: {
          op.kind = OpKind::kCalloc;
          static constexpr size_t kElems[] = {1, 2, 8, 24};
          op.calloc_elem = kElems[in.u8() % 4];
          op.size = decode_size(in) / op.calloc_elem * op.calloc_elem;
          break;
        }
        case 4: {
          op.kind = OpKind::kAlignedAlloc;
          uint8_t shape = in.u8();
          op.align = kMinAlign << (shape % 13);  // 16 B .. 64 KiB
          size_t most = (size_t{1} << 20) / op.align;
          size_t multiples = shape & 0x80 ? in.u16() % (most + 1) : in.u8() % 5;
          op.size = multiples * op.align;
          break;
        }
        case 5:
        case 6:
          op.kind = OpKind::kFree;
          break;
        case 7:
          op.kind = OpKind::kFreeSized;
          break;
        case 8:
        case 9:
          op.kind = OpKind::kRealloc;
          op.size = decode_size(in);
          break;
        case 10:
        case 11:
          op.kind = OpKind::kCheck;
          break;
        case 12:
          op.kind = OpKind::kTrim;
          break;
        case 13:
          if (restarts++ < kMaxWorkerRestarts) restart_worker();
          continue;
        default: {  // 14, 15: allocated by one thread, freed at once by the other
          op.kind = OpKind::kMalloc;
          op.size = decode_size(in);
          dispatch(op, on_worker ? Holder::kWorker : Holder::kDispatcher);
          Op release_op = op;
          release_op.kind = OpKind::kFree;
          release_op.acts_on = 0;
          op = release_op;
          on_worker = !on_worker;
          break;
        }
      }
      dispatch(op, on_worker ? Holder::kWorker : Holder::kDispatcher);
    }
    finish();
  }

 private:
  // What `op` does to `slot`: the map and the work count updated.
  enum class Effect { kActs, kSkips, kStops };
  Effect account(const Op& op, size_t slot, Holder by) {
    bool full = map_.full[slot];
    switch (op.kind) {
      case OpKind::kMalloc:
      case OpKind::kCalloc:
      case OpKind::kAlignedAlloc:
        if (full) return Effect::kSkips;
        if (map_.live_bytes + op.size > kMaxLiveBytes) return Effect::kStops;
        work_bytes_ += op.size;
        map_.set(slot, by, true, op.size);
        return Effect::kActs;
      case OpKind::kRealloc:
        if (map_.live_bytes - map_.bytes[slot] + op.size > kMaxLiveBytes) return Effect::kStops;
        work_bytes_ += map_.bytes[slot] + 2 * op.size;
        // realloc(p, 0) frees p; realloc(NULL, 0) is a new object.
        map_.set(slot, by, !(full && op.size == 0), op.size);
        return Effect::kActs;
      case OpKind::kFree:
      case OpKind::kFreeSized:
        if (!full) return Effect::kSkips;
        work_bytes_ += map_.bytes[slot];
        map_.set(slot, by, false, 0);
        return Effect::kActs;
      case OpKind::kCheck:
        if (!full) return Effect::kSkips;
        work_bytes_ += map_.bytes[slot];
        map_.holder[slot] = by;
        return Effect::kActs;
      case OpKind::kTrim:
        break;
    }
    return Effect::kSkips;
  }

  void dispatch(Op op, Holder by) {
    bool from_worker = false;
    if (op.kind != OpKind::kTrim) {
      for (size_t i = 0; i < op.count; i++) {
        size_t slot = op.first + i;
        Holder was = map_.holder[slot];
        Effect effect = account(op, slot, by);
        if (effect == Effect::kStops) {
          op.count = static_cast<uint16_t>(i);
          break;
        }
        if (effect == Effect::kSkips) continue;
        op.acts_on |= uint32_t{1} << i;
        from_worker |= was == Holder::kWorker;
      }
      if (op.acts_on == 0) return;
    }
    // Slots passing from the worker to the dispatcher wait until the worker
    // is done with them; slots passing to the worker travel in the queue's
    // order, behind whatever the dispatcher did to them.
    if (from_worker && by == Holder::kDispatcher) worker().drain();
    run_on(op, by);
  }

  void run_on(const Op& op, Holder by) {
    if (by == Holder::kWorker)
      worker().post(op);
    else
      execute(op);
  }

  Worker& worker() {
    if (g_worker == nullptr) g_worker = new Worker();
    return *g_worker;
  }

  // Its objects pass to the dispatcher; roost parks its allocator, so their
  // frees go to a thread that is gone.
  void restart_worker() {
    if (g_worker == nullptr) return;
    g_worker->drain();
    g_worker->stop();
    delete g_worker;
    g_worker = nullptr;
    for (size_t slot = 0; slot < kSlots; slot++)
      if (map_.holder[slot] == Holder::kWorker) map_.holder[slot] = Holder::kDispatcher;
  }

  // Each thread frees what it holds: nothing outlives the input.
  void finish() {
    Op free_one;
    free_one.kind = OpKind::kFree;
    free_one.acts_on = 1;
    for (size_t slot = 0; slot < kSlots; slot++) {
      if (!map_.full[slot]) continue;
      free_one.first = static_cast<uint16_t>(slot);
      run_on(free_one, map_.holder[slot]);
    }
    if (g_worker != nullptr) g_worker->drain();
    for (size_t slot = 0; slot < kSlots; slot++)
      if (g_objects[slot].ptr != nullptr)
        fail("object left behind", slot, g_objects[slot].ptr, 0, 0);
    map_ = SlotMap{};
    work_bytes_ = 0;
  }

  SlotMap map_;
  size_t work_bytes_ = 0;
  uint64_t inputs_ = 0;
};

Dispatcher g_dispatcher;

void print_tally() {
  struct roost_stats s {};
  roost_stats(&s);
  fprintf(stderr,
          "ops_fuzz (%s build): %llu inputs, %llu objects, %llu freed by the other thread; roost: "
          "%llu remote frees, %llu messages received, %llu BatchIt evictions, %llu allocators\n",
          ROOST_FUZZ_BUILD, static_cast<unsigned long long>(g_inputs),
          static_cast<unsigned long long>(g_objects_made.load()),
          static_cast<unsigned long long>(g_freed_by_other_thread.load()),
          static_cast<unsigned long long>(s.remote_frees),
          static_cast<unsigned long long>(s.messages_received),
          static_cast<unsigned long long>(s.batchit_evictions),
          static_cast<unsigned long long>(s.allocators));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  atexit(print_tally);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_inputs++;
  InputReader in(data, size);
  g_dispatcher.run(in);
  return 0;
}
