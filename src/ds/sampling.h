// ds/sampling.h — the arithmetic of sampling allocations by bytes.
//
// The heap profiler samples as if sample points fell on the bytes a thread
// allocates as a Poisson process of rate 1/R (R: the mean interval,
// ROOST_PROFILE_RATE): an object that holds a point is sampled.  By the
// process's lack of memory, an object of s bytes is then sampled with
// probability p(s) = 1 - exp(-s/R) whatever came before it, independently
// of every other object, so counting a sampled object as 1/p(s) objects
// and s/p(s) bytes makes every estimate unbiased, for any mix of sizes.
// The distance to the next point is exponential with mean R (drawn here);
// independent processes per size class add up to one of the same rate.
//
// Owns: the random source (xorshift64*), the exponential draw, p(s) and the
// weights, computed without libm (a natural logarithm and an exp of our
// own, accurate to about 1e-13 relative).  Must never: keep state beyond
// the generator the caller passes, or be used on a fast path (floating
// point, divisions).
#pragma once

#include <cstdint>

#include "ds/bits.h"

namespace roost::sampling {

// xorshift64*: a generator's state is any nonzero word.
inline uint64_t next_random(uint64_t& state) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545f4914f6cdd1dull;
}

inline constexpr double kLn2 = 0.69314718055994530942;

// The series below as polynomials with constant coefficients (Horner's
// rule: no division per term): 1/(2k+1) for atanh, 1/n! for exp.
inline constexpr int kAtanhTerms = 12;  // s^1 .. s^23: |s| <= 0.1716 leaves < 1e-19
inline constexpr int kExpTerms = 20;    // r^0 .. r^19: |r| < ln 2 leaves < 1e-19
inline constexpr auto kAtanhCoefficients = [] {
  struct {
    double c[kAtanhTerms];
  } t{};
  for (int k = 0; k < kAtanhTerms; k++) t.c[k] = 1.0 / (2 * k + 1);
  return t;
}();
inline constexpr auto kExpCoefficients = [] {
  struct {
    double c[kExpTerms];
  } t{};
  double f = 1;
  for (int n = 0; n < kExpTerms; n++) {
    if (n > 0) f *= n;
    t.c[n] = 1.0 / f;
  }
  return t;
}();

// ln(x) for x > 0 (finite): x = m * 2^e with m in [sqrt(1/2), sqrt(2)),
// ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), by its series in s^2.
inline double ln(double x) {
  uint64_t bits_of_x = __builtin_bit_cast(uint64_t, x);
  int e = static_cast<int>((bits_of_x >> 52) & 0x7ff) - 1023;
  double m = __builtin_bit_cast(
      double, (bits_of_x & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52));  // [1, 2)
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e++;
  }
  double s = (m - 1) / (m + 1);
  double s2 = s * s;
  double sum = kAtanhCoefficients.c[kAtanhTerms - 1];
  for (int k = kAtanhTerms - 2; k >= 0; k--) sum = sum * s2 + kAtanhCoefficients.c[k];
  return 2 * s * sum + e * kLn2;
}

// exp(-r) for 0 <= r < 1 by its series.
inline double exp_neg_small(double r) {
  double sum = kExpCoefficients.c[kExpTerms - 1];
  for (int n = kExpTerms - 2; n >= 0; n--) sum = sum * -r + kExpCoefficients.c[n];
  return sum;
}

// exp(-x) - 1 for x >= 0: by its series below 1/2 (no cancellation:
// (exp(-x) - 1) / -x summed first), else exp(-x) from 2^-k exp(-r),
// r = x - k ln 2 in [0, ln 2).
inline double expm1_neg(double x) {
  if (x < 0.5) {
    double sum = kExpCoefficients.c[kExpTerms - 1];
    for (int n = kExpTerms - 2; n >= 1; n--) sum = sum * -x + kExpCoefficients.c[n];
    return -x * sum;
  }
  if (x > 700) return -1;
  int k = static_cast<int>(x * (1 / kLn2));
  double r = x - k * kLn2;
  double scale = __builtin_bit_cast(double, static_cast<uint64_t>(1023 - k) << 52);  // 2^-k
  return exp_neg_small(r) * scale - 1;
}

// Bytes to the next sample point: exponential with mean `rate`, floored
// (an object of s bytes is sampled when this is below s).  A rate of 1
// samples every allocation (0: the point is on the next byte).
inline uint64_t draw_interval(uint64_t& state, uint64_t rate) {
  if (rate <= 1) return 0;
  // u in (0, 1]: 53 random bits, plus one so that ln(u) is finite.
  double u = static_cast<double>((next_random(state) >> 11) + 1) * 0x1p-53;
  double bytes = -ln(u) * static_cast<double>(rate);
  return bytes >= 0x1p62 ? uint64_t{1} << 62 : static_cast<uint64_t>(bytes);
}

// The probability that an object of `size` bytes holds a sample point.
inline double inclusion(uint64_t size, uint64_t rate) {
  if (rate <= 1 || size == 0) return 1;
  return -expm1_neg(static_cast<double>(size) / static_cast<double>(rate));
}

// What one sampled object of `size` bytes stands for: bytes, and objects
// in units of 2^-kObjectFractionBits (so that sums and differences of
// weights stay exact).
inline constexpr unsigned kObjectFractionBits = 20;
struct Weight {
  uint64_t bytes;
  uint64_t objects_fp;
};
inline Weight weight(uint64_t size, uint64_t rate) {
  double p = inclusion(size, rate);
  if (p >= 1) return {size, uint64_t{1} << kObjectFractionBits};
  return {static_cast<uint64_t>(static_cast<double>(size) / p + 0.5),
          static_cast<uint64_t>(static_cast<double>(uint64_t{1} << kObjectFractionBits) / p + 0.5)};
}

}  // namespace roost::sampling
