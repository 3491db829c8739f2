// The arithmetic of sampling by bytes (ds/sampling.h): its logarithm and
// exponential against libm's, to 1e-13 relative; the exponential draw's
// mean and its edge cases; the inclusion probability and the weights that
// make every estimate unbiased.
#include "ds/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

using namespace roost;

namespace {

constexpr double kTolerance = 1e-13;

double relative_error(double got, double want) {
  return want == 0 ? std::fabs(got) : std::fabs((got - want) / want);
}

}  // namespace

TEST(Sampling, LnMatchesLibmOverTheWholeRange) {
  double worst = 0;
  // Every binade a draw can reach (u in (0, 1]) and beyond, at many points
  // within each, and the points where the mantissa folds (sqrt 2).
  for (int e = -60; e <= 60; e++) {
    for (int i = 0; i < 64; i++) {
      double x = std::ldexp(1.0 + i / 64.0, e);
      worst = std::fmax(worst, relative_error(sampling::ln(x), std::log(x)));
    }
  }
  for (double x :
       {1.0, 0.5, 2.0, 1.4142135623730951, 1.4142135623730949, 0x1p-53, 1 - 0x1p-53, 1 + 0x1p-52}) {
    if (x == 1.0) {
      EXPECT_EQ(sampling::ln(x), 0.0);
      continue;
    }
    worst = std::fmax(worst, relative_error(sampling::ln(x), std::log(x)));
  }
  EXPECT_LT(worst, kTolerance);
}

TEST(Sampling, Expm1NegMatchesLibmOnBothSidesOfItsSwitch) {
  double worst = 0;
  for (int i = 1; i <= 4000; i++) {
    double x = i * 0.01;  // 0.01 .. 40
    worst = std::fmax(worst, relative_error(sampling::expm1_neg(x), std::expm1(-x)));
  }
  for (double x : {1e-12, 1e-6, 0.4999999, 0.5, 0.5000001, 0.6931471805599453, 1.0, 699.0})
    worst = std::fmax(worst, relative_error(sampling::expm1_neg(x), std::expm1(-x)));
  EXPECT_LT(worst, kTolerance);
  EXPECT_EQ(sampling::expm1_neg(0), 0.0);
  EXPECT_EQ(sampling::expm1_neg(800), -1.0);
}

TEST(Sampling, DrawsAreExponentialWithTheRateAsTheirMean) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  constexpr int kDraws = 200000;
  constexpr uint64_t kRate = 512 * 1024;
  double sum = 0;
  int below_mean = 0;
  for (int i = 0; i < kDraws; i++) {
    uint64_t d = sampling::draw_interval(state, kRate);
    sum += static_cast<double>(d);
    below_mean += d < kRate;
  }
  // The mean within 1 % (its standard error is 0.22 %); P(d < mean) is
  // 1 - 1/e.
  EXPECT_NEAR(sum / kDraws / kRate, 1.0, 0.01);
  EXPECT_NEAR(static_cast<double>(below_mean) / kDraws, 1 - std::exp(-1.0), 0.01);
  // A rate of 1 (or 0) samples every allocation.
  EXPECT_EQ(sampling::draw_interval(state, 1), 0u);
  EXPECT_EQ(sampling::draw_interval(state, 0), 0u);
}

TEST(Sampling, WeightsScaleAnObjectByItsChanceOfBeingSampled) {
  constexpr uint64_t kRate = 512 * 1024;
  for (uint64_t size : {uint64_t{16}, uint64_t{1024}, uint64_t{65536}, kRate, 8 * kRate}) {
    double p = sampling::inclusion(size, kRate);
    EXPECT_LT(relative_error(p, -std::expm1(-static_cast<double>(size) / kRate)), kTolerance);
    sampling::Weight w = sampling::weight(size, kRate);
    EXPECT_NEAR(static_cast<double>(w.bytes), size / p, 0.5) << size;
    EXPECT_NEAR(static_cast<double>(w.objects_fp),
                std::ldexp(1.0, sampling::kObjectFractionBits) / p, 0.5)
        << size;
  }
  // Every allocation sampled: each stands for itself.
  sampling::Weight w = sampling::weight(100, 1);
  EXPECT_EQ(w.bytes, 100u);
  EXPECT_EQ(w.objects_fp, uint64_t{1} << sampling::kObjectFractionBits);
  EXPECT_EQ(sampling::inclusion(0, kRate), 1.0);
}
