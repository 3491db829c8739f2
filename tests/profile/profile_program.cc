// A program for the heap profiler's tests (profile_check.py runs it under
// roost-run --profile or ROOST_PROFILE=leaks and reads what roost wrote).
//
//   profile_program sites   two call sites, site_a and site_b, allocate in
//                           the ratio 3:1 in bytes (1 KiB and 1 MiB objects,
//                           4 threads); each thread then frees half of its
//                           neighbour's objects; prints the truth:
//                           "truth site_a inuse=B alloc=B", the same for b
//   profile_program apis    one function per allocation call (via_malloc,
//                           via_calloc, ..., via_new), each allocating 64
//                           KiB in all and keeping it
//
// (The leak report's program is C, profile_leak.c: a C++ program keeps
// objects of libstdc++'s until exit.)
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <new>

namespace {

// noipa: no clone of it either (pprof would name "site_a [clone .constprop.0]").
#define NOINLINE __attribute__((noipa))

// Keeps the compiler from dropping an allocation or turning a call into a
// jump (which would take the calling function's frame off the stack).
inline void keep(void* p) { asm volatile("" : : "g"(p) : "memory"); }

void say(const char* s) { (void)!write(1, s, strlen(s)); }

void say_number(unsigned long long v) {
  char buf[24];
  int n = sizeof(buf);
  buf[--n] = 0;
  do {
    buf[--n] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  say(buf + n);
}

// ---- sites ----

constexpr int kThreads = 4;
constexpr size_t kSmall = 1024;     // a size class's own size
constexpr size_t kLarge = 1 << 20;  // whole pages
constexpr int kSmallPerUnit = 2048;
constexpr int kLargePerUnit = 2;
constexpr int kSlots = 4 * (kSmallPerUnit + kLargePerUnit);

struct Objects {
  void* p[kSlots];
  size_t size[kSlots];
  int site[kSlots];  // 0: a, 1: b
  int n;
};
Objects g_objects[kThreads];
pthread_barrier_t g_barrier;

}  // namespace

void* site_a(size_t n);
void* site_b(size_t n);

namespace {

void add(Objects& o, void* p, size_t size, int site) {
  o.p[o.n] = p;
  o.size[o.n] = size;
  o.site[o.n] = site;
  o.n++;
}

void* sites_thread(void* arg) {
  int t = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  Objects& mine = g_objects[t];
  // Interleaved, so that both sites see the same mix of sizes over time.
  for (int i = 0; i < kSmallPerUnit; i++) {
    for (int k = 0; k < 3; k++) add(mine, site_a(kSmall), kSmall, 0);
    add(mine, site_b(kSmall), kSmall, 1);
    if (i % (kSmallPerUnit / kLargePerUnit) == 0) {
      for (int k = 0; k < 3; k++) add(mine, site_a(kLarge), kLarge, 0);
      add(mine, site_b(kLarge), kLarge, 1);
    }
  }
  pthread_barrier_wait(&g_barrier);
  // Every other group of four (three of site_a's, one of site_b's) of the
  // next thread's objects, freed here: half of each site's.
  Objects& theirs = g_objects[(t + 1) % kThreads];
  for (int i = 0; i < theirs.n; i++) {
    if ((i / 4) % 2 == 0) continue;
    free(theirs.p[i]);
    theirs.p[i] = nullptr;
  }
  return nullptr;
}

int sites() {
  pthread_barrier_init(&g_barrier, nullptr, kThreads);
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; t++)
    pthread_create(&threads[t], nullptr, sites_thread, reinterpret_cast<void*>(intptr_t{t}));
  for (pthread_t& t : threads) pthread_join(t, nullptr);
  unsigned long long inuse[2] = {0, 0}, alloc[2] = {0, 0};
  for (const Objects& o : g_objects) {
    for (int i = 0; i < o.n; i++) {
      alloc[o.site[i]] += o.size[i];
      if (o.p[i] != nullptr) inuse[o.site[i]] += o.size[i];
    }
  }
  for (int s = 0; s < 2; s++) {
    say(s == 0 ? "truth site_a inuse=" : "truth site_b inuse=");
    say_number(inuse[s]);
    say(" alloc=");
    say_number(alloc[s]);
    say("\n");
  }
  return 0;  // what is still allocated stays: the profile at exit holds it
}

// ---- apis: 64 KiB from each way of allocating ----

constexpr size_t kApiBytes = 64 * 1024;
constexpr size_t kApiObject = 512;

NOINLINE void via_malloc() {
  for (size_t i = 0; i < kApiBytes / kApiObject; i++) keep(malloc(kApiObject));
}
NOINLINE void via_calloc() {
  for (size_t i = 0; i < kApiBytes / kApiObject; i++) keep(calloc(1, kApiObject));
}
NOINLINE void via_realloc() {
  for (size_t i = 0; i < kApiBytes / kApiObject; i++) keep(realloc(nullptr, kApiObject));
}
NOINLINE void via_aligned_alloc() {
  for (size_t i = 0; i < kApiBytes / kApiObject; i++) keep(aligned_alloc(64, kApiObject));
}
NOINLINE void via_posix_memalign() {
  for (size_t i = 0; i < kApiBytes / kApiObject; i++) {
    void* p = nullptr;
    if (posix_memalign(&p, 128, kApiObject) == 0) keep(p);
  }
}
NOINLINE void via_memalign() {
  for (size_t i = 0; i < kApiBytes / kApiObject; i++) keep(memalign(256, kApiObject));
}
NOINLINE void via_new() {
  for (size_t i = 0; i < kApiBytes / kApiObject; i++) keep(new char[kApiObject]);
}
NOINLINE void via_malloc_large() { keep(malloc(kApiBytes * 8)); }

int apis() {
  via_malloc();
  via_calloc();
  via_realloc();
  via_aligned_alloc();
  via_posix_memalign();
  via_memalign();
  via_new();
  via_malloc_large();
  return 0;
}

}  // namespace

// The two sites (outside the anonymous namespace: their names are plain in
// pprof's output).  Each counts its calls in a counter of its own, so that
// the compiler cannot fold one into the other.
unsigned long g_site_calls[2];

NOINLINE void* site_a(size_t n) {
  void* p = malloc(n);
  keep(p);
  g_site_calls[0]++;
  return p;
}

NOINLINE void* site_b(size_t n) {
  void* p = malloc(n);
  keep(p);
  g_site_calls[1]++;
  return p;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "sites") == 0) return sites();
  if (argc == 2 && strcmp(argv[1], "apis") == 0) return apis();
  say("usage: profile_program sites|apis\n");
  return 2;
}
