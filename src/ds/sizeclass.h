// ds/sizeclass.h — the size classes: 16-byte minimum, two mantissa bits per
// power of two (at most 25 % internal waste), as in the snmalloc paper §2.6.
//
// Owns: size <-> class mapping and the per-class constants (slab size,
// capacity, wake threshold, the object-start test's multiplier),
// all computed at compile time.  Must never: know about slabs' state or
// allocators.
#pragma once

#include "config.h"
#include "ds/bits.h"

namespace roost::sizeclass {

// Class -> object size.  Class c encodes (exponent e, mantissa m) of c+1;
// e == 0 has no leading one, so the first classes are 16, 32, 48, 64, then
// four classes per doubling: 80, 96, 112, 128, 160, ...
constexpr size_t to_size(unsigned sc) {
  unsigned v = sc + 1;
  size_t m = v & 3;
  unsigned e = v >> 2;
  size_t b = e == 0 ? 0 : 1;
  return (m + b * 4) << (config::kMinAllocBits + e - b);
}

// Size -> smallest class holding it (size >= 1).
constexpr unsigned from_size_clz(size_t size) {
  size_t s = size - 1;
  unsigned e = 58u - static_cast<unsigned>(__builtin_clzl(s | 32));
  unsigned b = e == 0 ? 0 : 1;
  unsigned m = static_cast<unsigned>(s >> (config::kMinAllocBits + e - b)) & 3;
  return (e << 2) + m;
}

inline constexpr unsigned kCount = from_size_clz(config::kMaxSmall) + 1;
static_assert(to_size(kCount - 1) == config::kMaxSmall);

// The object-start test counts a slab's offsets in 16-byte units (every
// object size is a multiple of 16, every object start 16-byte aligned).
// Its multiplier is ceil(2^32 / units), modulo 2^32, for an object of
// `units` units (0 for the 16-byte class, where every unit starts an
// object): a unit offset below 2^18 (a slab of up to 4 MiB) is a multiple
// of `units` exactly when unit * inverse, modulo 2^32, is at most
// inverse - 1, modulo 2^32 (Lemire, Kaser and Kurz's divisibility test:
// a multiply and a compare, no division; exact while the offset's and the
// divisor's bits add up to 32 at most: 18 + 14).
constexpr uint32_t inverse_of(size_t size) {
  return static_cast<uint32_t>(0xffffffffu / (size >> config::kMinAllocBits) + 1);
}
ROOST_INLINE constexpr bool is_multiple(uint32_t units, uint32_t inverse) {
  return units * inverse <= inverse - 1;
}

struct ClassInfo {
  uint32_t size;         // object size in bytes
  uint8_t slab_bits;     // log2 of the slab size
  uint32_t capacity;     // objects per slab
  uint32_t wake;         // frees into a sleeping slab before it is reused
  uint32_t carve;        // objects carved from a slab's bump tail at a time, at most
  uint32_t first_carve;  // an allocator's first carve of the class: a small page's worth
  uint32_t inverse;      // inverse_of(size)
};

constexpr ClassInfo make_info(unsigned sc) {
  size_t size = to_size(sc);
  unsigned slab_bits = bits::log2_ceil(size) + config::kTargetObjectsPerSlabBits;
  if (slab_bits > config::kTargetSlabBits) slab_bits = config::kTargetSlabBits;
  if (slab_bits < bits::log2_ceil(size) + config::kMinObjectsPerSlabBits)
    slab_bits = bits::log2_ceil(size) + config::kMinObjectsPerSlabBits;
  if (slab_bits < config::kGranuleBits) slab_bits = config::kGranuleBits;
  // (The hardened build's guard page at the slab's end holds no object.)
  size_t capacity = ((size_t{1} << slab_bits) - config::kSlabGuardBytes) / size;
  size_t wake = capacity >> config::kWakeShift;
  if (wake == 0) wake = 1;
  // Carve a page at a time; small pages' worth of big objects are topped up
  // to kMinCarveObjects within kMaxCarveBytes, and at least one object.
  size_t carve = config::kCarveBytes / size;
  if (carve < config::kMinCarveObjects) {
    carve = config::kMaxCarveBytes / size;
    if (carve > config::kMinCarveObjects) carve = config::kMinCarveObjects;
    if (carve == 0) carve = 1;
  }
  if (carve > capacity) carve = capacity;
  // An allocator's first carve of the class touches one small page (or one
  // object), so that a class a program uses a little costs it a page, not a
  // batch (SizeClassSlabs::batch).
  size_t first = config::kCarveBytes / size;
  if (first == 0) first = 1;
  if (first > carve) first = carve;
  return ClassInfo{static_cast<uint32_t>(size),
                   static_cast<uint8_t>(slab_bits),
                   static_cast<uint32_t>(capacity),
                   static_cast<uint32_t>(wake),
                   static_cast<uint32_t>(carve),
                   static_cast<uint32_t>(first),
                   inverse_of(size)};
}

struct InfoTable {
  ClassInfo info[kCount];
  constexpr InfoTable() : info{} {
    for (unsigned i = 0; i < kCount; i++) info[i] = make_info(i);
  }
};
inline constexpr InfoTable kInfo{};

// A slab's carve count and touched pages are 16-bit fields of its record;
// its object-start test (is_multiple) counts offsets below 2^18 units of
// 16 bytes, and its carve test (frontend/slab.h) compares addresses' low
// 32 bits, so a slab is 4 MiB at most.
constexpr bool fits_slab_record() {
  for (unsigned i = 0; i < kCount; i++)
    if (kInfo.info[i].capacity > 0xffff ||
        (size_t{1} << kInfo.info[i].slab_bits) >> config::kMinPageBits > 0xffff ||
        kInfo.info[i].slab_bits > 22 || (kInfo.info[i].size >> config::kMinAllocBits) > (1u << 14))
      return false;
  return true;
}
static_assert(fits_slab_record());

// Table for sizes 0..kTableClassified, indexed by the size itself (one
// load, no arithmetic, on the malloc fast path).
// Size 0 takes class 0, or `zero_size_class` where one is given.
struct SmallTable {
  uint8_t cls[config::kTableClassified + 1];
  constexpr explicit SmallTable(unsigned zero_size_class = 0) : cls{} {
    for (size_t size = 0; size <= config::kTableClassified; size++)
      cls[size] = static_cast<uint8_t>(size == 0 ? zero_size_class : from_size_clz(size));
  }
};
inline constexpr SmallTable kSmallTable{};

// Each class's slab size in bytes (the secure build's malloc fast path
// checks a link against it: see Allocator::alloc).
struct SlabSizeTable {
  uint64_t bytes[kCount];
  constexpr SlabSizeTable() : bytes{} {
    for (unsigned sc = 0; sc < kCount; sc++) bytes[sc] = uint64_t{1} << kInfo.info[sc].slab_bits;
  }
};

// Size -> class for size <= kTableClassified: one table load.
ROOST_INLINE constexpr unsigned from_size_table(size_t size) { return kSmallTable.cls[size]; }

// Size -> class for size <= kMaxSmall, without division.
ROOST_INLINE constexpr unsigned from_size(size_t size) {
  if (ROOST_LIKELY(size <= config::kTableClassified)) return from_size_table(size);
  return from_size_clz(size);
}

// The class of an object of `size` bytes aligned to `align` (a power of
// two): objects sit at multiples of the class size from a slab base aligned
// to the slab size, so the first class from size rounded up to `align`
// whose size is a multiple of `align` (within four classes a power of two
// comes).  kCount when no class serves it.
constexpr unsigned for_aligned(size_t size, size_t align) {
  if (align <= config::kMinAlloc) return size <= config::kMaxSmall ? from_size(size) : kCount;
  if (size > config::kMaxSmall || align > config::kMaxSmall) return kCount;
  size_t s = bits::align_up(size == 0 ? 1 : size, align);
  if (s > config::kMaxSmall) return kCount;
  unsigned sc = from_size(s);
  while (sc < kCount && (kInfo.info[sc].size & (align - 1)) != 0) sc++;
  return sc;
}

constexpr size_t slab_size(unsigned sc) { return size_t{1} << kInfo.info[sc].slab_bits; }

}  // namespace roost::sizeclass
