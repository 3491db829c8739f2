// frontend/profile.cc — implementation of frontend/profile.h.
#include "frontend/profile.h"

#include "backend/large.h"
#include "backend/meta_arena.h"
#include "ds/sampling.h"
#include "ds/sizeclass.h"
#include "ds/spinlock.h"
#include "frontend/profile_report.h"
#include "options.h"
#include "platform/os.h"
#include "platform/stack_trace.h"
#include "platform/text_section.h"

namespace roost::profile {

std::atomic<bool> g_on{false};

namespace {

constexpr unsigned kMaxFrames = 64;
// Frames captured: roost's own come first and are left out.
constexpr unsigned kCaptureFrames = kMaxFrames + 16;

struct Stack {
  Stack* next;  // in its hash bucket
  uint64_t hash;
  uint64_t alloc_bytes, alloc_objects_fp;
  uint64_t live_bytes, live_objects_fp;
  uint64_t samples, live_samples;
  uint64_t oldest_ns;  // scratch of snapshot()
  uint32_t depth;
  uintptr_t pcs[kMaxFrames];
};

struct Sample {
  Stack* stack;
  Sample* prev;  // the live samples' list (the free list: next only)
  Sample* next;
  sampling::Weight weight;
  uint64_t time_ns;
  unsigned sizeclass;  // sizeclass::kCount: a large object
};

constexpr size_t kBuckets = size_t{1} << 14;
constexpr size_t kSamplesPerBlock = 64;

// Under g_lock: the stacks, the samples, the totals.
SpinLock g_lock;
Stack** g_buckets = nullptr;  // kBuckets, made at the first sample
Sample g_live = {nullptr, &g_live, &g_live, {0, 0}, 0, 0};
Sample* g_spare = nullptr;
uint64_t g_stacks = 0, g_samples = 0, g_live_samples = 0;
// The periodic profile: the estimated bytes allocated, and when the next
// profile is due.
uint64_t g_allocated = 0, g_next_profile = 0;

// Set by start().
uint64_t g_rate = 1;
// What a sampled object of each size class stands for at g_rate (start()).
sampling::Weight g_class_weights[sizeclass::kCount];
uint64_t g_interval = 0;

__thread bool t_inside __attribute__((tls_model("initial-exec"))) = false;
__thread uint64_t t_random __attribute__((tls_model("initial-exec"))) = 0;
// The calling thread's large objects: bytes to their next sample point.
__thread uint64_t t_large_left __attribute__((tls_model("initial-exec"))) = 0;
__thread bool t_large_started __attribute__((tls_model("initial-exec"))) = false;

uint64_t& random_state() {
  if (t_random == 0) t_random = os::entropy() | 1;
  return t_random;
}

uint64_t hash_of(const uintptr_t* pcs, uint32_t depth) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ depth;
  for (uint32_t i = 0; i < depth; i++) {
    h ^= pcs[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h;
}

// The calling thread's stack from the frame whose return address is
// `caller` (roost's entry into its slow path), roost's own frames left out;
// its depth.
uint32_t capture_program_stack(uintptr_t* out, const void* caller) {
  uintptr_t pcs[kCaptureFrames];
  size_t n = stack_trace::capture(pcs, kCaptureFrames);
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    if (pcs[i] == reinterpret_cast<uintptr_t>(caller)) {
      start = i;
      break;
    }
  }
  // Where roost is a shared object, whatever of it lies beyond (a malloc
  // that called its slow path rather than jumping to it, calloc's helper).
  while (start < n && stack_trace::in_roost(pcs[start])) start++;
  uint32_t depth = 0;
  for (size_t i = start; i < n && depth < kMaxFrames; i++) out[depth++] = pcs[i];
  return depth;
}

// Under g_lock.
Stack* find_or_add(const uintptr_t* pcs, uint32_t depth, uint64_t hash) {
  if (g_buckets == nullptr) {
    g_buckets = static_cast<Stack**>(meta_arena::alloc(kBuckets * sizeof(Stack*), 4096));
    if (g_buckets == nullptr) return nullptr;
  }
  Stack** bucket = &g_buckets[hash & (kBuckets - 1)];
  for (Stack* s = *bucket; s != nullptr; s = s->next) {
    if (s->hash != hash || s->depth != depth) continue;
    uint32_t i = 0;
    while (i < depth && s->pcs[i] == pcs[i]) i++;
    if (i == depth) return s;
  }
  auto* s = static_cast<Stack*>(meta_arena::alloc(sizeof(Stack), alignof(Stack)));
  if (s == nullptr) return nullptr;  // (zeroed)
  s->hash = hash;
  s->depth = depth;
  for (uint32_t i = 0; i < depth; i++) s->pcs[i] = pcs[i];
  s->next = *bucket;
  *bucket = s;
  g_stacks++;
  return s;
}

// Under g_lock.
Sample* new_sample() {
  if (g_spare == nullptr) {
    auto* block =
        static_cast<Sample*>(meta_arena::alloc(kSamplesPerBlock * sizeof(Sample), alignof(Sample)));
    if (block == nullptr) return nullptr;
    for (size_t i = 0; i < kSamplesPerBlock; i++) {
      block[i].next = g_spare;
      g_spare = &block[i];
    }
  }
  Sample* x = g_spare;
  g_spare = x->next;
  return x;
}

// Records the object of record `m`, `bytes` of class `sc`, as sampled, with
// the calling thread's stack (the thread is inside the profiler).  False
// when metadata memory runs out: the object is then not sampled.
bool record(ChunkMeta* m, uint64_t bytes, unsigned sc, const void* caller) {
  uintptr_t pcs[kMaxFrames];
  uint32_t depth = capture_program_stack(pcs, caller);
  uint64_t hash = hash_of(pcs, depth);
  sampling::Weight w =
      sc < sizeclass::kCount ? g_class_weights[sc] : sampling::weight(bytes, g_rate);
  uint64_t now = os::now_ns();
  bool periodic = false;
  {
    LockGuard guard(g_lock);
    Stack* s = find_or_add(pcs, depth, hash);
    Sample* x = s != nullptr ? new_sample() : nullptr;
    if (x == nullptr) return false;
    x->stack = s;
    x->weight = w;
    x->time_ns = now;
    x->sizeclass = sc;
    x->next = &g_live;
    x->prev = g_live.prev;
    g_live.prev->next = x;
    g_live.prev = x;
    s->alloc_bytes += w.bytes;
    s->alloc_objects_fp += w.objects_fp;
    s->live_bytes += w.bytes;
    s->live_objects_fp += w.objects_fp;
    s->samples++;
    s->live_samples++;
    g_samples++;
    g_live_samples++;
    g_allocated += w.bytes;
    if (g_interval != 0 && g_allocated >= g_next_profile) {
      g_next_profile = g_allocated + g_interval;
      periodic = true;
    }
    m->sample = x;
  }
  if (periodic) report::dump_periodic();
  return true;
}

}  // namespace

ROOST_COMMON_TEXT Inside::Inside() : was_(t_inside) { t_inside = true; }
ROOST_COMMON_TEXT Inside::~Inside() { t_inside = was_; }

// The option first: reports_here() costs a system call, which the common
// path (profiling off) does not make.
ROOST_COMMON_TEXT bool wanted() {
  return options::get(options::kProfile) != options::kProfileOff && options::reports_here();
}

void start() {
  g_rate = options::get(options::kProfileRate);
  for (unsigned sc = 0; sc < sizeclass::kCount; sc++)
    g_class_weights[sc] = sampling::weight(sizeclass::kInfo.info[sc].size, g_rate);
  g_interval = options::get(options::kProfileInterval);
  g_next_profile = g_interval;
  {
    Inside inside;
    stack_trace::prime();
  }
  // release: pairs with on()'s acquire.
  g_on.store(true, std::memory_order_release);
}

bool may_sample() { return !t_inside; }

ROOST_COMMON_TEXT void exclude_this_thread() { t_inside = true; }

uint64_t next_interval() { return sampling::draw_interval(random_state(), g_rate); }

bool note_sampled(ChunkMeta* m, unsigned sc, const void* caller) {
  Inside inside;
  return record(m, sizeclass::kInfo.info[sc].size, sc, caller);
}

void note_large(ChunkMeta* m, const void* caller) {
  if (!may_sample()) return;
  // The bytes the program may use (the secure build's: the size asked for).
  uint64_t size = large::usable(m);
  if (!t_large_started) {
    t_large_left = next_interval();
    t_large_started = true;
  }
  if (t_large_left >= size) {
    t_large_left -= size;
    return;
  }
  t_large_left = next_interval();
  Inside inside;
  record(m, size, sizeclass::kCount, caller);
}

void note_resized(ChunkMeta* m, const void* caller) {
  if (m->sample != nullptr) forget(m);
  note_large(m, caller);
}

void forget(ChunkMeta* m) {
  auto* x = static_cast<Sample*>(m->sample);
  m->sample = nullptr;
  LockGuard guard(g_lock);
  Stack* s = x->stack;
  s->live_bytes -= x->weight.bytes;
  s->live_objects_fp -= x->weight.objects_fp;
  s->live_samples--;
  g_live_samples--;
  x->prev->next = x->next;
  x->next->prev = x->prev;
  x->next = g_spare;
  g_spare = x;
}

unsigned sampled_class(const ChunkMeta* m) {
  const auto* x = static_cast<const Sample*>(m->sample);
  return x != nullptr ? x->sizeclass : sizeclass::kCount;
}

Summary summary() {
  LockGuard guard(g_lock);
  return Summary{g_rate, g_stacks, g_samples, g_live_samples};
}

size_t snapshot(StackFigures* out, size_t max) {
  LockGuard guard(g_lock);
  if (g_buckets == nullptr) return 0;
  // Each stack's oldest live sample.
  for (size_t b = 0; b < kBuckets; b++)
    for (Stack* s = g_buckets[b]; s != nullptr; s = s->next) s->oldest_ns = UINT64_MAX;
  for (Sample* x = g_live.next; x != &g_live; x = x->next)
    if (x->time_ns < x->stack->oldest_ns) x->stack->oldest_ns = x->time_ns;
  size_t n = 0;
  for (size_t b = 0; b < kBuckets && n < max; b++) {
    for (Stack* s = g_buckets[b]; s != nullptr && n < max; s = s->next) {
      out[n++] =
          StackFigures{s->pcs,        s->depth,           s->alloc_bytes, s->alloc_objects_fp,
                       s->live_bytes, s->live_objects_fp, s->samples,     s->live_samples,
                       s->oldest_ns};
    }
  }
  return n;
}

void lock_for_fork() { g_lock.lock(); }
void unlock_after_fork(bool child) { g_lock.unlock_after_fork(child); }

}  // namespace roost::profile
