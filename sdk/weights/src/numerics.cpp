#include "qgpu/weights/numerics.h"

#include <bit>
#include <cmath>
#include <limits>

namespace qgpu::weights {

std::string_view dtype_name(DType dtype) {
  return dtype == DType::kBF16 ? "bf16" : "fp32";
}

bool exact_in(DType dtype, double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) != x) return false;
  return dtype == DType::kF32 || round_bf16(f) == f;
}

// Where a circuit's switches sit, exp needs no computing: for x >= 32, exp(-x) < 2^-46 and
// 1 + exp(-x) rounds to 1; for finite x <= -104, exp(-x) overflows to inf (exp(88.73) is the
// largest float). Either way the formulas below give the same bits as with exp computed.
namespace {
bool far_above(float x) {
  return x >= 32.0f;
}
bool far_below(float x) {
  return x <= -104.0f && x >= -std::numeric_limits<float>::max();
}
}  // namespace

float silu(float x) {
  if (far_above(x)) return x;       // x / 1
  if (far_below(x)) return -0.0f;  // x / inf
  return x / (1.0f + std::exp(-x));
}

float silu_bf16(float x) {
  if (far_above(x)) return round_bf16(x);
  if (far_below(x)) return -0.0f;
  float e = round_bf16(std::exp(-x));
  float d = round_bf16(1.0f + e);
  return round_bf16(x / d);
}

float sigmoid(float x) {
  if (far_above(x)) return 1.0f;
  if (far_below(x)) return 0.0f;
  return 1.0f / (1.0f + std::exp(-x));
}

float softplus(float x) {
  if (x > 20.0f) return x;
  float e = std::exp(x);
  // ATen's vectorised log1p returns 0 for the smallest denormal (measured: softplus(x) == 0 exactly for
  // x <= -102.873466, where exp(x) rounds to 2^-149); glibc's log1pf would return 2^-149 there.
  if (e <= std::numeric_limits<float>::denorm_min()) return 0.0f;
  return std::log1p(e);
}

float rsqrt(float x) {
  return 1.0f / std::sqrt(x);
}

}  // namespace qgpu::weights
