// The saturation constants of NUMERICS.md §1 (measured with PyTorch on CPU)
// are the contract the reference activations must meet exactly.
#include "qgpu/weights/numerics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "qgpu/weights/reference.h"

namespace qgpu::weights {
namespace {

float below(float x) {
  return std::nextafter(x, -INFINITY);
}
float above(float x) {
  return std::nextafter(x, INFINITY);
}

TEST(Numerics, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f), 1.0f);                // tie, even stays
  EXPECT_EQ(round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);  // tie, odd rounds up
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xC000);
  EXPECT_TRUE(std::isnan(round_bf16(NAN)));
  EXPECT_EQ(round_bf16(3.4e38f), INFINITY);  // above bf16's largest finite value
  EXPECT_TRUE(exact_in(DType::kBF16, 256));
  EXPECT_FALSE(exact_in(DType::kBF16, 257));
  EXPECT_TRUE(exact_in(DType::kF32, 257));
}

TEST(Numerics, Fp32SiluAndSigmoidSaturateAtMeasuredPoints) {
  const float hi = 16.635532f;  // NUMERICS.md: silu(x) == x and sigmoid(x) == 1 from here
  EXPECT_EQ(silu(hi), hi);
  EXPECT_NE(silu(below(hi)), below(hi));
  EXPECT_NE(silu(16.63553047f), 16.63553047f);
  EXPECT_EQ(silu(16.0f), 15.999998f);
  EXPECT_EQ(sigmoid(hi), 1.0f);
  EXPECT_LT(sigmoid(below(hi)), 1.0f);
  for (float x = hi; x < 1e6f; x = x * 1.01f) ASSERT_EQ(silu(x), x) << x;

  const float lo = -88.722839f;  // silu == -0 and sigmoid == 0 from here down
  EXPECT_EQ(silu(lo), 0.0f);
  EXPECT_TRUE(std::signbit(silu(lo)));
  EXPECT_NE(silu(above(lo)), 0.0f);
  EXPECT_NE(silu(-88.722832f), 0.0f);
  EXPECT_EQ(sigmoid(lo), 0.0f);
  EXPECT_NE(sigmoid(above(lo)), 0.0f);
  for (float x = lo; x > -3e38f; x = x * 1.5f) ASSERT_EQ(silu(x), 0.0f) << x;
  EXPECT_TRUE(std::isnan(silu(-INFINITY)));  // why huge mute gains must stay finite
  EXPECT_NE(silu(-64.0f), 0.0f);             // 64 is not a safe "off" gain
  EXPECT_EQ(silu(-128.0f), 0.0f);
}

TEST(Numerics, SoftplusAndExpSaturateAtMeasuredPoints) {
  const float sp = -102.873466f;
  EXPECT_EQ(softplus(sp), 0.0f);
  EXPECT_GT(softplus(above(sp)), 0.0f);
  EXPECT_EQ(softplus(above(sp)), 0x1p-148f);  // the denormal 2.8e-45
  EXPECT_EQ(softplus(21.0f), 21.0f);          // threshold 20
  EXPECT_EQ(std::exp(-0x1p-25f), 1.0f);       // exp(g) == 1 for g >= -2.98e-8
  EXPECT_LT(std::exp(below(-0x1p-25f)), 1.0f);
  EXPECT_EQ(std::exp(-2.98e-8f), 1.0f);
  EXPECT_EQ(std::exp(-103.972084f), 0.0f);
  EXPECT_GT(std::exp(above(-103.972084f)), 0.0f);
  // Decay exp(-softplus(dt)) is exactly 1 for dt <= -17.3287 (A_log = 0); -32 is used.
  EXPECT_EQ(std::exp(-softplus(-17.3288f)), 1.0f);
  EXPECT_LT(std::exp(-softplus(-17.32f)), 1.0f);
  EXPECT_EQ(std::exp(-softplus(static_cast<float>(kDtBias))), 1.0f);
  EXPECT_LT(std::exp(-softplus(-16.0f)), 1.0f);  // leaks 1.2e-7 per token
}

TEST(Numerics, Bf16ActivationsSaturateAtMeasuredPoints) {
  // Every bf16 bit pattern, with the op applied to a bf16 tensor as torch 1.13 does it.
  float silu_id = INFINITY, silu_zero = -INFINITY, sig_one = INFINITY;
  for (int b = 0; b < 65536; ++b) {
    float x = bf16_from_bits(static_cast<std::uint16_t>(b));
    if (!std::isfinite(x)) continue;
    float s = silu_bf16(x), g = round_bf16(sigmoid(x));
    if (x > 0 && s != x) silu_id = std::max(silu_id == INFINITY ? x : silu_id, x);
    if (x < 0 && s != 0) silu_zero = std::min(silu_zero == -INFINITY ? x : silu_zero, x);
    if (x > 0 && g != 1.0f) sig_one = std::max(sig_one == INFINITY ? x : sig_one, x);
  }
  // The largest failing values are the bf16 neighbours of the measured boundaries.
  EXPECT_EQ(silu_id, 5.53125f);  // exact from 5.5625
  EXPECT_EQ(silu_zero, -88.5f);  // exactly 0 from -89.0
  EXPECT_EQ(sig_one, 6.21875f);  // exactly 1 from 6.25
  EXPECT_EQ(round_bf16(sigmoid(6.21875f)), 0.99609375f);
}

TEST(Numerics, NormScaleIsExactForPowersOfFourFrom64) {
  for (int k = -30; k <= 30; ++k) EXPECT_EQ(rsqrt(std::ldexp(1.0f, 2 * k)), std::ldexp(1.0f, -k)) << k;
  EXPECT_NE(16.0f + kEps, 16.0f);
  EXPECT_EQ(32.0f + kEps, 32.0f);
  EXPECT_EQ(64.0f + kEps, 64.0f);
}

TEST(Numerics, GatedNormCalibrationMatchesThePrototype) {
  // NUMERICS.md §2: a stored 1 reads as 1.9999998 in fp32 (fl(1/√128)² < 2^-7), 2 in bf16;
  // the calibrated weights are 0.50000006 and 0.5.
  EXPECT_EQ(gated_norm_one(128, 128, DType::kF32), 1.9999998f);
  EXPECT_EQ(gated_norm_one(128, 128, DType::kBF16), 2.0f);
  EXPECT_EQ(calibrated_norm_weight(128, 128, DType::kF32), 0.50000006f);
  EXPECT_EQ(calibrated_norm_weight(128, 128, DType::kBF16), 0.5f);
  // One F32 checkpoint value serves both: loading it in bf16 rounds 0.50000006 to 0.5.
  EXPECT_EQ(round_bf16(calibrated_norm_weight(128, 128, DType::kF32)), 0.5f);
}

}  // namespace
}  // namespace qgpu::weights
