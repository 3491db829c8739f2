// tests/fuzz/misuse_fuzz.cc — libFuzzer harness: each input is one heap
// misuse after some legitimate allocations, run in a forked child against
// roost (libroost.a or libroost-secure.a, linked in as malloc & co.).
//
// The parent decodes the input into a Plan (steps for the child's main
// thread and two helper threads, A and B, created before anything else),
// forks, and judges how the child ended.  A build that catches the misuse
// must stop the child with SIGABRT after exactly one line on stderr,
// "roost: <where>: <fault> 0x<address>..." (any fault name: see
// src/frontend/checks.h and src/platform/error.cc); a child that exits
// normally is accepted only where the build is not expected to catch the
// misuse.  Anything else (SIGSEGV, SIGBUS, another message, a child still
// running after kChildSeconds) is printed and the parent traps, so libFuzzer
// records the input as a crash.  A child whose misuse could not be set up
// as planned (the victim's memory reused at another address, a corruption
// that changes nothing) says so and exits with kSkippedExit, which passes.
//
// What each build is expected to catch:
//   secure   every double free: small or large, local or remote (a helper
//            frees it first or second, after churn, kept allocations, frees
//            of its neighbours, a helper's exit), and huge ones;
//   default  only what it catches by design (tests/misuse_catalog_test.cc's
//            Caught::kAll cases): large and huge double frees, and
//            free(p); free(p) at once followed by allocations of p's size
//            class, in a thread whose allocator is fresh (a new thread in
//            the child: the parent never lets a thread exit, so the pool has
//            no parked allocator to hand it).  Its fast paths are unchecked
//            by design, so no other case is generated for it.
// Corrupted free-list links (secure build only): an already-freed small
// object's first or second 8 bytes overwritten, then 2 x (objects per 64 KiB
// slab, at least 16) allocations of its size; the child may exit normally
// (the corruption was never followed) or stop with the diagnostic, never
// crash otherwise.  ROOSTTEST_FUZZ_PLANS=1 prints each input's
// plan and how its child ended (to read what a saved input does: run the
// binary on the file).
//
// Owns: the plans, the child's execution of them, the parent's verdict.
// Must never: misuse the heap in the parent (only children do), let a child
// outlive its input, or generate a case for a build that is not meant to
// catch it.
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <iterator>
#include <regex>
#include <string>
#include <string_view>

#include "input_reader.h"

extern "C" void free_sized(void* p, size_t size);

namespace {

#ifndef ROOST_FUZZ_BUILD
#error "ROOST_FUZZ_BUILD must name the build under test: \"default\" or \"secure\""
#endif
constexpr bool kSecureBuild = std::string_view(ROOST_FUZZ_BUILD) == "secure";

constexpr unsigned kChildSeconds = 5;  // the child's alarm()
constexpr int kSkippedExit = 86;       // the child could not set the misuse up
constexpr size_t kMaxSteps = 24;
constexpr size_t kMaxSiblings = 48;
constexpr size_t kMaxKept = 256;
constexpr size_t kSmallMax = size_t{256} << 10;  // roost's largest small class
constexpr size_t kGranule = size_t{64} << 10;

bool env_flag(const char* name) {
  const char* e = getenv(name);
  return e != nullptr && strcmp(e, "1") == 0;
}

// ---- plans ----

enum class Misuse : uint8_t { kSmallDoubleFree, kLargeDoubleFree, kHugeDoubleFree, kCorruptedLink };
enum Actor : uint8_t { kMain, kHelperA, kHelperB, kActors };

enum class Action : uint8_t {
  kAllocPrefix,   // a legitimate object of `size`, kept to the end
  kAllocVictim,   // the victim (plan's size); small: then `count` more of its size
  kFreeVictim,    // free(victim), or free_sized when `sized`
  kChurn,         // `count` malloc/free pairs of `size`
  kKeep,          // `count` allocations of `size`, kept
  kFreeSiblings,  // free `count` of the victim's live siblings (never the keeper)
  kExit,          // the actor's thread exits: outbox posted, allocator parked
  kCorrupt,       // overwrite a word of the (freed) victim
  kExhaust,       // 2 x (objects per 64 KiB slab) allocations of the victim's size
};

struct Step {
  Actor actor = kMain;
  Action action = Action::kAllocPrefix;
  bool sized = false;
  uint32_t count = 0;
  size_t size = 0;
};

struct Plan {
  Misuse misuse = Misuse::kSmallDoubleFree;
  size_t victim_size = 0;
  uint32_t siblings = 0;      // small victims: same-size objects after it
  uint8_t corrupt_word = 0;   // 0: bytes 0..7, 1: bytes 8..15
  uint8_t corrupt_mode = 0;   // see corrupted_value()
  uint64_t corrupt_bits = 0;  // the input's bytes for it
  size_t step_count = 0;
  Step steps[kMaxSteps];

  void add(const Step& s) {
    if (step_count < kMaxSteps) steps[step_count++] = s;
  }
  bool uses(Actor a) const {
    for (size_t i = 0; i < step_count; i++)
      if (steps[i].actor == a) return true;
    return false;
  }
};

using roost_fuzz::InputReader;

// Small sizes (0 to 256 KiB), most of them very small.
size_t decode_small_size(InputReader& in) {
  switch (in.u8() % 8) {
    case 0:
    case 1:
    case 2:
    case 3:
      return in.u8() % 129;
    case 4:
      return in.u16() % 1025;
    case 5:
      return in.u16() % 4097;
    case 6:
      return in.u16() % 32769;
    default:
      return in.u24() % (kSmallMax + 1);
  }
}

// Large sizes: above 256 KiB, up to about 4 MiB.
size_t decode_large_size(InputReader& in) { return kSmallMax + 1 + in.u24() % (size_t{4} << 20); }

size_t decode_any_size(InputReader& in) {
  return in.u8() % 4 == 0 ? decode_large_size(in) : decode_small_size(in);
}

// Sizes a and b may share a size class (classes are at most 25 % apart, so
// sizes more than twice apart never do; 0 to 16 all share the smallest).
bool may_share_class(size_t a, size_t b) { return !(a > 2 * b + 16 || 2 * a + 16 < b); }

// The actors still alive after the plan so far, and which ones it may use.
struct Cast {
  bool alive[kActors] = {true, true, true};

  Actor pick(uint8_t byte) {
    for (unsigned i = 0; i < kActors; i++) {
      Actor a = static_cast<Actor>((byte + i) % kActors);
      if (alive[a]) return a;
    }
    return kMain;
  }
  Actor other_than(Actor a, uint8_t byte) {
    Actor b = static_cast<Actor>((a + 1 + byte % (kActors - 1)) % kActors);
    return alive[b] ? b : pick(byte);
  }
};

// The legitimate allocations before the victim: a count, then sizes.
struct Prefix {
  unsigned count = 0;
  size_t sizes[8] = {};

  explicit Prefix(InputReader& in) {
    count = in.u8() % 8;
    for (unsigned i = 0; i < count; i++) sizes[i] = decode_any_size(in);
  }
  // Sizes of `avoid_class_of`'s class left out (SIZE_MAX: none).
  void add_to(Plan& plan, Actor owner, size_t avoid_class_of = SIZE_MAX) const {
    for (unsigned i = 0; i < count; i++) {
      if (avoid_class_of != SIZE_MAX && may_share_class(sizes[i], avoid_class_of)) continue;
      plan.add({owner, Action::kAllocPrefix, false, 0, sizes[i]});
    }
  }
};

// Steps between two frees: allocations and frees that move the victim
// around (its slab's free list, a BatchIt cache, a message, a parked
// allocator).  Large victims: large sizes only, so no slab is carved where
// the victim was.
void add_between(InputReader& in, Plan& plan, Cast& cast, bool large) {
  unsigned n = in.u8() % 4;
  for (unsigned i = 0; i < n; i++) {
    uint8_t what = in.u8();
    Actor by = cast.pick(in.u8());
    auto size = [&] {
      if (large) return decode_large_size(in);
      return what & 0x80 ? plan.victim_size : decode_any_size(in);
    };
    switch (what % 4) {
      case 0:
        plan.add({by, Action::kChurn, false, 1 + in.u16() % 2000, size()});
        break;
      case 1:
        plan.add({by, Action::kKeep, false, 1 + in.u8() % 64u, size()});
        break;
      case 2:
        if (!large) plan.add({by, Action::kFreeSiblings, false, 1 + in.u8() % 16u, 0});
        break;
      default:
        if (by != kMain) {
          plan.add({by, Action::kExit, false, 0, 0});
          cast.alive[by] = false;
        }
        break;
    }
  }
}

// The victim's two frees: the first by its owner or another actor, the
// second by any actor alive, with add_between()'s steps between; in the
// secure build either may be free_sized.
void add_two_frees(InputReader& in, Plan& plan, Cast& cast, Actor owner, bool large) {
  uint8_t first = in.u8();
  Actor first_by = first & 1 ? cast.other_than(owner, first >> 1) : owner;
  plan.add({first_by, Action::kFreeVictim, kSecureBuild && (first & 0x80) != 0, 0, 0});
  add_between(in, plan, cast, large);
  uint8_t second = in.u8();
  plan.add({cast.pick(second), Action::kFreeVictim, kSecureBuild && (second & 0x80) != 0, 0, 0});
}

// Secure build: a small object freed twice, with anything between.
void plan_small_double_free(InputReader& in, Plan& plan) {
  Cast cast;
  Actor owner = in.u8() & 1 ? kHelperA : kMain;
  Prefix(in).add_to(plan, owner);
  plan.victim_size = decode_small_size(in);
  plan.siblings = 2 + in.u8() % (kMaxSiblings - 1);
  plan.add({owner, Action::kAllocVictim, false, plan.siblings, 0});
  add_two_frees(in, plan, cast, owner, false);
  plan.add({cast.pick(in.u8()), Action::kExhaust, false, 0, 0});
}

// Default build: free(p); free(p) at once in a fresh thread, then
// allocations of p's class (caught when its slab's free list, headed by
// p linked to itself, is handed out).  The prefix avoids p's class.  The
// input is read as plan_small_double_free() reads it, as far as it goes.
void plan_small_double_free_at_once(InputReader& in, Plan& plan) {
  (void)in.u8();  // the owner: always a fresh thread here
  Prefix prefix(in);
  plan.victim_size = decode_small_size(in);
  prefix.add_to(plan, kHelperA, plan.victim_size);
  plan.add({kHelperA, Action::kAllocVictim, false, 0, 0});
  plan.add({kHelperA, Action::kFreeVictim, false, 0, 0});
  plan.add({kHelperA, Action::kFreeVictim, false, 0, 0});
  plan.add({kHelperA, Action::kExhaust, false, 0, 0});
}

void plan_large_double_free(InputReader& in, Plan& plan) {
  Cast cast;
  Actor owner = in.u8() & 1 ? kHelperA : kMain;
  Prefix(in).add_to(plan, owner);
  plan.victim_size = decode_large_size(in);
  plan.add({owner, Action::kAllocVictim, false, 0, 0});
  add_two_frees(in, plan, cast, owner, true);
}

void plan_huge_double_free(InputReader& in, Plan& plan) {
  plan.victim_size = (size_t{1} << 30) + 1 + size_t{in.u8()} * kGranule;  // mapped alone
  plan.add({kMain, Action::kAllocVictim, false, 0, 0});
  plan.add({kMain, Action::kFreeVictim, false, 0, 0});
  plan.add({kMain, Action::kFreeVictim, false, 0, 0});
}

// Secure build: a freed small object's link or mark
// overwritten, then its class allocated from until its slab runs dry.
void plan_corrupted_link(InputReader& in, Plan& plan) {
  Cast cast;
  Actor owner = in.u8() & 1 ? kHelperA : kMain;
  Prefix(in).add_to(plan, owner);
  // At least a byte: the secure build's zero-size allocations have no
  // memory to overwrite (an access faults).
  plan.victim_size = decode_small_size(in);
  if (plan.victim_size == 0) plan.victim_size = 1;
  plan.siblings = 2 + in.u8() % (kMaxSiblings - 1);
  plan.add({owner, Action::kAllocVictim, false, plan.siblings, 0});
  uint8_t shape = in.u8();
  Actor freer = shape & 1 ? cast.other_than(owner, shape >> 4) : owner;
  if (shape & 2) plan.add({freer, Action::kFreeSiblings, false, 1 + in.u8() % 16u, 0});
  plan.add({freer, Action::kFreeVictim, false, 0, 0});
  if (shape & 4) plan.add({freer, Action::kFreeSiblings, false, 1 + in.u8() % 16u, 0});
  plan.corrupt_word = (shape >> 3) & 1;
  plan.corrupt_mode = in.u8() % 4;
  plan.corrupt_bits = in.u64();
  plan.add({owner, Action::kCorrupt, false, 0, 0});
  if ((shape & 0x40) && freer != kMain) {  // the freer's exit posts what it holds
    plan.add({freer, Action::kExit, false, 0, 0});
    cast.alive[freer] = false;
  }
  if (shape & 0x80)
    plan.add({cast.pick(in.u8()), Action::kFreeSiblings, false, 1 + in.u8() % 16u, 0});
  plan.add({cast.alive[owner] ? owner : kMain, Action::kExhaust, false, 0, 0});
}

// What an input's first byte picks, per build: its value modulo the
// table's length indexes it.
struct Choice {
  Misuse misuse;
  void (*plan)(InputReader&, Plan&);
};
constexpr Choice kSmall{Misuse::kSmallDoubleFree, plan_small_double_free};
constexpr Choice kSmallAtOnce{Misuse::kSmallDoubleFree, plan_small_double_free_at_once};
constexpr Choice kLarge{Misuse::kLargeDoubleFree, plan_large_double_free};
constexpr Choice kHuge{Misuse::kHugeDoubleFree, plan_huge_double_free};
constexpr Choice kLink{Misuse::kCorruptedLink, plan_corrupted_link};
constexpr Choice kSecureChoices[] = {kSmall, kSmall, kSmall, kSmall, kSmall, kSmall, kSmall, kLarge,
                                     kLarge, kLarge, kHuge,  kLink,  kLink,  kLink,  kLink,  kLink};
constexpr Choice kDefaultChoices[] = {kSmallAtOnce, kSmallAtOnce, kSmallAtOnce, kSmallAtOnce,
                                      kLarge,       kLarge,       kLarge,       kHuge};

void decode_plan(InputReader& in, Plan& plan) {
  uint8_t kind = in.u8();
  const Choice& c = kSecureBuild ? kSecureChoices[kind % std::size(kSecureChoices)]
                                 : kDefaultChoices[kind % std::size(kDefaultChoices)];
  plan.misuse = c.misuse;
  c.plan(in, plan);
}

const char* misuse_name(Misuse m) {
  switch (m) {
    case Misuse::kSmallDoubleFree:
      return "small double free";
    case Misuse::kLargeDoubleFree:
      return "large double free";
    case Misuse::kHugeDoubleFree:
      return "huge double free";
    case Misuse::kCorruptedLink:
      return "corrupted link";
  }
  return "?";
}

const char* action_name(Action a) {
  switch (a) {
    case Action::kAllocPrefix:
      return "alloc-prefix";
    case Action::kAllocVictim:
      return "alloc-victim";
    case Action::kFreeVictim:
      return "free-victim";
    case Action::kChurn:
      return "churn";
    case Action::kKeep:
      return "keep";
    case Action::kFreeSiblings:
      return "free-siblings";
    case Action::kExit:
      return "exit";
    case Action::kCorrupt:
      return "corrupt";
    case Action::kExhaust:
      return "exhaust";
  }
  return "?";
}

std::string describe(const Plan& plan) {
  static const char kActorNames[] = "MAB";
  char buf[160];
  snprintf(buf, sizeof(buf), "%s build, %s of a %zu-byte victim (%u siblings)", ROOST_FUZZ_BUILD,
           misuse_name(plan.misuse), plan.victim_size, plan.siblings);
  std::string text = buf;
  if (plan.misuse == Misuse::kCorruptedLink) {
    snprintf(buf, sizeof(buf), ", word %u, mode %u, bits 0x%llx", plan.corrupt_word,
             plan.corrupt_mode, static_cast<unsigned long long>(plan.corrupt_bits));
    text += buf;
  }
  text += ":";
  for (size_t i = 0; i < plan.step_count; i++) {
    const Step& s = plan.steps[i];
    snprintf(buf, sizeof(buf), " %c:%s%s", kActorNames[s.actor], action_name(s.action),
             s.sized ? "(sized)" : "");
    text += buf;
    if (s.count != 0 || s.size != 0) {
      snprintf(buf, sizeof(buf), "[%u x %zu]", s.count, s.size);
      text += buf;
    }
  }
  return text;
}

// ---- the child ----

// Writes `text` on stderr without allocating.
void say(const char* text) {
  size_t n = strlen(text);
  while (n > 0) {
    ssize_t w = write(2, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

[[noreturn]] void skip_case(const char* why) {
  say("misuse_fuzz: case skipped: ");
  say(why);
  say("\n");
  _exit(kSkippedExit);
}

// Through volatile pointers: the compiler neither folds nor drops the calls.
void* (*volatile g_malloc)(size_t) = malloc;
void (*volatile g_free)(void*) = free;
void (*volatile g_free_sized)(void*, size_t) = free_sized;

// The child's objects.  Each step runs on one thread, after the previous
// step finished (g_turn / g_done order them), so no two threads touch these
// at once.
struct ChildObjects {
  unsigned char* victim = nullptr;
  size_t victim_usable = 0;
  void* keeper = nullptr;
  void* siblings[kMaxSiblings] = {};
  size_t sibling_count = 0;
  void* kept[kMaxKept] = {};
  size_t kept_count = 0;
};

const Plan* g_plan = nullptr;
ChildObjects g_objects;
std::atomic<size_t> g_turn{SIZE_MAX};
std::atomic<size_t> g_done{0};

// Whether [p, p + n) overlaps the victim's memory.
bool overlaps_victim(const void* p, size_t n) {
  auto a = reinterpret_cast<uintptr_t>(p);
  auto v = reinterpret_cast<uintptr_t>(g_objects.victim);
  return a < v + g_objects.victim_usable && v < a + (n == 0 ? 1 : n);
}

// An allocation made while the victim is freed: its address back is an
// object of its own (freed at once, so the victim's next free is a double
// free again); its memory reused at another address ends the case.
void* allocate_beside_victim(size_t size) {
  void* p = g_malloc(size);
  if (p == nullptr) skip_case("an allocation failed");
  if (size != 0) static_cast<unsigned char*>(p)[0] = 0x5a;  // zero-size: nothing to write
  if (g_objects.victim == nullptr || !overlaps_victim(p, malloc_usable_size(p))) return p;
  if (p != g_objects.victim) skip_case("the victim's memory came back at another address");
  g_free(p);
  return nullptr;
}

// A lower bound of the size of the slab holding small objects of `usable`
// bytes (docs/DESIGN.md: 64 KiB slabs up to 4 KiB, at least 16 objects
// above, in naturally aligned power-of-two chunks).
size_t slab_bound(size_t usable) {
  size_t pow2 = 1;
  while (pow2 < usable) pow2 <<= 1;
  return 16 * pow2 > kGranule ? 16 * pow2 : kGranule;
}

void alloc_victim(const Step& step) {
  ChildObjects& o = g_objects;
  o.victim = static_cast<unsigned char*>(g_malloc(g_plan->victim_size));
  if (o.victim == nullptr) skip_case("the victim could not be allocated");
  o.victim_usable = malloc_usable_size(o.victim);
  memset(o.victim, 0x11, o.victim_usable < 64 ? o.victim_usable : 64);
  if (g_plan->victim_size > kSmallMax) return;
  // The keeper keeps the victim's slab from emptying (and being reused for
  // other objects) while the victim is freed: the first sibling found in
  // the same slab.
  size_t slab = slab_bound(o.victim_usable);
  for (uint32_t i = 0; i < step.count && i < kMaxSiblings; i++) {
    void* p = g_malloc(g_plan->victim_size);
    if (p == nullptr) skip_case("a sibling could not be allocated");
    memset(p, 0x22, g_plan->victim_size < 16 ? g_plan->victim_size : 16);
    bool same_slab =
        reinterpret_cast<uintptr_t>(p) / slab == reinterpret_cast<uintptr_t>(o.victim) / slab;
    if (o.keeper == nullptr && same_slab)
      o.keeper = p;
    else
      o.siblings[o.sibling_count++] = p;
  }
  if (o.keeper == nullptr && g_plan->misuse == Misuse::kSmallDoubleFree && kSecureBuild)
    skip_case("no object of the victim's slab to keep it from emptying");
}

void free_siblings(uint32_t count) {
  ChildObjects& o = g_objects;
  for (size_t i = 0; i < o.sibling_count && count > 0; i++) {
    if (o.siblings[i] == nullptr) continue;
    g_free(o.siblings[i]);
    o.siblings[i] = nullptr;
    count--;
  }
}

// The value the plan writes over the victim's word, given what is there.
uint64_t corrupted_value(uint64_t old) {
  uint64_t bits = g_plan->corrupt_bits;
  switch (g_plan->corrupt_mode) {
    case 0:  // the input's bytes
      return bits;
    case 1:  // one bit flipped
      return old ^ (uint64_t{1} << (bits % 64));
    case 2:  // a nearby address
      return old + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(bits)) * 16);
    default: {  // another object of the class, live or freed
      const ChildObjects& o = g_objects;
      size_t n = o.sibling_count;
      void* other = n == 0 || bits % (n + 1) == n ? o.keeper : o.siblings[bits % (n + 1)];
      if (other == nullptr) other = o.keeper;
      return reinterpret_cast<uintptr_t>(other);
    }
  }
}

void corrupt_victim() {
  unsigned char* word = g_objects.victim + 8 * g_plan->corrupt_word;
  uint64_t old;
  memcpy(&old, word, 8);
  uint64_t value = corrupted_value(old);
  if (value == old) skip_case("the corruption would leave the word as it was");
  memcpy(word, &value, 8);
}

void exhaust() {
  size_t usable = g_objects.victim_usable;
  size_t per_slab = usable == 0 ? kGranule / 16 : kGranule / usable;
  if (per_slab < 16) per_slab = 16;
  for (size_t i = 0; i < 2 * per_slab; i++) {
    unsigned char* p = static_cast<unsigned char*>(g_malloc(g_plan->victim_size));
    if (p == nullptr) continue;
    size_t n = g_plan->victim_size;
    memset(p, 0x5a, n < 16 ? n : 16);
    if (n > 0) p[n - 1] = 0xa5;
  }
}

void run_step(const Step& step) {
  ChildObjects& o = g_objects;
  switch (step.action) {
    case Action::kAllocPrefix: {
      void* p = g_malloc(step.size);
      if (p == nullptr) skip_case("a prefix allocation failed");
      memset(p, 0x33, step.size < 32 ? step.size : 32);
      break;
    }
    case Action::kAllocVictim:
      alloc_victim(step);
      break;
    case Action::kFreeVictim:
      if (step.sized)
        g_free_sized(o.victim, g_plan->victim_size);
      else
        g_free(o.victim);
      break;
    case Action::kChurn:
      for (uint32_t i = 0; i < step.count; i++) {
        void* p = allocate_beside_victim(step.size);
        if (p != nullptr) g_free(p);
      }
      break;
    case Action::kKeep:
      for (uint32_t i = 0; i < step.count && o.kept_count < kMaxKept; i++) {
        void* p = allocate_beside_victim(step.size);
        if (p != nullptr) o.kept[o.kept_count++] = p;
      }
      break;
    case Action::kFreeSiblings:
      free_siblings(step.count);
      break;
    case Action::kExit:
      break;  // the helper returns after it (helper_main)
    case Action::kCorrupt:
      corrupt_victim();
      break;
    case Action::kExhaust:
      exhaust();
      break;
  }
}

void* helper_main(void* arg) {
  auto me = static_cast<Actor>(reinterpret_cast<uintptr_t>(arg));
  for (;;) {
    size_t t = g_turn.load(std::memory_order_acquire);
    if (t == SIZE_MAX || g_plan->steps[t].actor != me ||
        g_done.load(std::memory_order_relaxed) != t) {
      sched_yield();
      continue;
    }
    run_step(g_plan->steps[t]);
    g_done.store(t + 1, std::memory_order_release);
    if (g_plan->steps[t].action == Action::kExit) return nullptr;
  }
}

[[noreturn]] void run_child(const Plan& plan, int stderr_fd) {
  // libFuzzer's handlers would report the child's signals as the parent's
  // crashes: the defaults, and nothing blocked.
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  dup2(stderr_fd, 2);
  close(stderr_fd);
  alarm(kChildSeconds);

  // roost's service thread, which a child does not inherit, starts at the
  // first safe point with work (a large free leaves some): started now, its
  // pthread_create allocates nothing between the misuse's steps.
  for (int i = 0; i < 2; i++) g_free(g_malloc(16 * kGranule));

  g_plan = &plan;
  pthread_t helpers[kActors] = {};
  for (Actor a : {kHelperA, kHelperB}) {
    if (!plan.uses(a)) continue;
    if (pthread_create(&helpers[a], nullptr, helper_main,
                       reinterpret_cast<void*>(static_cast<uintptr_t>(a))) != 0)
      skip_case("pthread_create failed");
  }
  for (size_t i = 0; i < plan.step_count; i++) {
    const Step& step = plan.steps[i];
    if (step.actor == kMain) {
      run_step(step);
      g_done.store(i + 1, std::memory_order_relaxed);
      continue;
    }
    g_turn.store(i, std::memory_order_release);
    if (step.action == Action::kExit) {
      pthread_join(helpers[step.actor], nullptr);
      continue;
    }
    while (g_done.load(std::memory_order_acquire) != i + 1) sched_yield();
  }
  _exit(0);
}

// ---- the parent ----

struct ChildEnd {
  bool exited = false;
  int code = 0;    // when exited
  int signal = 0;  // when killed
  bool timed_out = false;
  std::string err;
};

bool is_one_diagnostic_line(const std::string& err) {
  static const std::regex kLine("roost: [^\n]+: [^\n]+ 0x[0-9a-f]+[^\n]*\n");
  return std::regex_match(err, kLine);
}

ChildEnd run_in_child(const Plan& plan) {
  ChildEnd end;
  int fds[2];
  if (pipe(fds) != 0) {
    perror("misuse_fuzz: pipe");
    __builtin_trap();
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("misuse_fuzz: fork");
    __builtin_trap();
  }
  if (pid == 0) {
    close(fds[0]);
    run_child(plan, fds[1]);
  }
  close(fds[1]);
  // The child's alarm ends it; this bound is for a child that ignores it.
  int wait_ms = static_cast<int>(kChildSeconds + 10) * 1000;
  char buf[4096];
  for (;;) {
    pollfd pfd = {fds[0], POLLIN, 0};
    int r = poll(&pfd, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      end.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (end.err.size() < 65536) end.err.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    end.exited = true;
    end.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    end.signal = WTERMSIG(status);
  }
  return end;
}

[[noreturn]] void report(const Plan& plan, const ChildEnd& end, const char* verdict) {
  fprintf(stderr, "misuse_fuzz: %s\n  case: %s\n  child: ", verdict, describe(plan).c_str());
  if (end.timed_out)
    fprintf(stderr, "still running after %u s, killed\n", kChildSeconds + 10);
  else if (end.exited)
    fprintf(stderr, "exited with status %d\n", end.code);
  else
    fprintf(stderr, "killed by signal %d (%s)\n", end.signal, strsignal(end.signal));
  fprintf(stderr, "  child's stderr:\n%s\n", end.err.c_str());
  __builtin_trap();
}

// How the children that passed ended, printed when the run ends.
struct Tally {
  uint64_t caught[4] = {};  // by Misuse
  uint64_t silent_links = 0;
  uint64_t skipped = 0;
};
Tally g_tally;

void print_tally() {
  fprintf(stderr,
          "misuse_fuzz (%s build): caught %llu small, %llu large and %llu huge double frees, "
          "%llu corrupted links; %llu corrupted links never followed; %llu cases skipped\n",
          ROOST_FUZZ_BUILD, static_cast<unsigned long long>(g_tally.caught[0]),
          static_cast<unsigned long long>(g_tally.caught[1]),
          static_cast<unsigned long long>(g_tally.caught[2]),
          static_cast<unsigned long long>(g_tally.caught[3]),
          static_cast<unsigned long long>(g_tally.silent_links),
          static_cast<unsigned long long>(g_tally.skipped));
}

void judge(const Plan& plan, const ChildEnd& end) {
  if (end.timed_out) report(plan, end, "the child hung");
  if (end.exited && end.code == kSkippedExit) {
    g_tally.skipped++;
    return;
  }
  if (end.exited && end.code == 0) {
    if (plan.misuse != Misuse::kCorruptedLink) report(plan, end, "misuse not caught");
    g_tally.silent_links++;  // the bad link was never followed
    return;
  }
  if (end.exited) report(plan, end, "the child failed");
  if (end.signal == SIGALRM) report(plan, end, "the child hung (its alarm went off)");
  if (end.signal != SIGABRT) report(plan, end, "the child crashed");
  if (!is_one_diagnostic_line(end.err))
    report(plan, end, "SIGABRT without exactly one \"roost: <where>: <fault> 0x<address>\" line");
  g_tally.caught[static_cast<unsigned>(plan.misuse)]++;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  atexit(print_tally);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  InputReader in(data, size);
  Plan plan;
  decode_plan(in, plan);
  static const bool print_plans = env_flag("ROOSTTEST_FUZZ_PLANS");
  if (print_plans) fprintf(stderr, "misuse_fuzz: plan: %s\n", describe(plan).c_str());
  ChildEnd end = run_in_child(plan);
  if (print_plans)
    fprintf(stderr, "misuse_fuzz: child %s %d: %s", end.exited ? "exited" : "killed by signal",
            end.exited ? end.code : end.signal,
            end.err.empty() ? "(nothing on stderr)\n" : end.err.c_str());
  judge(plan, end);
  return 0;
}
