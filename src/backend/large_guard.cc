// backend/large_guard.cc — implementation of backend/large_guard.h.
#include "backend/large_guard.h"

#include "config.h"
#include "platform/os.h"

namespace roost::large_guard {

namespace {

// The canary's byte at address `a`.
inline uint8_t canary_byte(uintptr_t a, uint64_t key) {
  return static_cast<uint8_t>(key >> ((a & 7) * 8));
}

}  // namespace

bool place(uintptr_t end) {
  return os::make_inaccessible(reinterpret_cast<void*>(end), os::page_size());
}

bool lift(uintptr_t end) {
  return os::make_accessible(reinterpret_cast<void*>(end), os::page_size());
}

void fill_slack(uintptr_t base, size_t size, size_t end, uint64_t key) {
  uintptr_t a = base + size, stop = base + end;
  // Bytes up to the first 8-aligned word, then whole words (each holds the
  // key itself, the base being page-aligned), then the bytes left.
  for (; a < stop && (a & 7) != 0; a++) *reinterpret_cast<uint8_t*>(a) = canary_byte(a, key);
  for (; a + 8 <= stop; a += 8) *reinterpret_cast<uint64_t*>(a) = key;
  for (; a < stop; a++) *reinterpret_cast<uint8_t*>(a) = canary_byte(a, key);
}

uintptr_t first_overwritten(uintptr_t base, size_t size, size_t end, uint64_t key) {
  uintptr_t a = base + size, stop = base + end;
  for (; a < stop && (a & 7) != 0; a++)
    if (*reinterpret_cast<const uint8_t*>(a) != canary_byte(a, key)) return a;
  for (; a + 8 <= stop; a += 8) {
    if (*reinterpret_cast<const uint64_t*>(a) != key) {
      while (*reinterpret_cast<const uint8_t*>(a) == canary_byte(a, key)) a++;
      return a;
    }
  }
  for (; a < stop; a++)
    if (*reinterpret_cast<const uint8_t*>(a) != canary_byte(a, key)) return a;
  return 0;
}

}  // namespace roost::large_guard
