// tests/kernels/dtype_test.cc — the scalar F16/BF16 conversions of util/dtype.h: every
// half decodes to its exact value and encodes back to itself, and floats encode to the
// nearest half (ties to even), found here by searching the two neighbouring halves.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "util/dtype.h"

namespace nextn {
namespace {

// The exact value of a half from its fields (independent of dtype.h's bit tricks).
double half_value(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -v : v;
}

TEST(Dtype, EveryHalfDecodesExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) {  // inf / NaN
      float f = f16_to_f32(uint16_t(h));
      EXPECT_TRUE((h & 0x3ff) ? std::isnan(f) : std::isinf(f)) << h;
      continue;
    }
    EXPECT_EQ(double(f16_to_f32(uint16_t(h))), half_value(uint16_t(h))) << h;
    EXPECT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h) << h;
  }
}

TEST(Dtype, FloatsEncodeToTheNearestHalfTiesToEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t x = bits(rng);
    if (i % 2) x = (x & 0x807fffff) | ((100 + x % 44) << 23);  // half the samples in the half range
    float f;
    std::memcpy(&f, &x, 4);
    if (std::isnan(f)) continue;
    uint16_t h = f32_to_f16(f);
    double a = std::fabs(double(f));
    if (a >= 65520.0) {
      EXPECT_EQ(h & 0x7fff, 0x7c00) << f;
      continue;
    }
    // Neighbours: the half just below |f| and the next one up.
    uint16_t lo = 0;
    for (int step = 1 << 14; step; step >>= 1)
      if (lo + step < 0x7c00 && half_value(uint16_t(lo + step)) <= a) lo = uint16_t(lo + step);
    uint16_t hi = uint16_t(lo + 1);
    double dlo = a - half_value(lo), dhi = half_value(hi) - a;
    uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    if (std::signbit(f)) want |= 0x8000;
    ASSERT_EQ(h, want) << "f=" << f << " bits=" << std::hex << x;
  }
}

TEST(Dtype, Bf16RoundsToNearestEven) {
  auto bf = [](uint32_t x) { float f; std::memcpy(&f, &x, 4); return f32_to_bf16(f); };
  EXPECT_EQ(bf(0x3f808000), 0x3f80);  // tie, even stays
  EXPECT_EQ(bf(0x3f818000), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(bf(0x3f808001), 0x3f81);  // above the tie
  EXPECT_EQ(bf16_to_f32(0x3f81), 1.0078125f);
}

}  // namespace
}  // namespace nextn
