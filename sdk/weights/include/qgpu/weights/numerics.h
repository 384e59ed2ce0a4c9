// Scalar numerics of Qwen3.5's layers as PyTorch computes them on CPU: bf16
// rounding and the activations whose saturation points make circuits exact.
//
// The saturation constants of ../shared/prototype/NUMERICS.md §1 are the
// contract (tests/numerics_test.cpp checks every one): e.g. silu(x) == x
// exactly for fp32 x >= 16.635532 and silu(x) == -0 for x <= -88.722839.
#pragma once

#include <bit>
#include <cstdint>
#include <string_view>

namespace qgpu::weights {

// The dtype a model runs in. kBF16 tensors are held in floats that are always
// bf16-representable; every op rounds where PyTorch rounds (QWEN35.md §7).
enum class DType { kF32, kBF16 };

std::string_view dtype_name(DType dtype);

// The bf16 bit pattern of x rounded to nearest, ties to even (what c10::BFloat16 does).
inline std::uint16_t bf16_bits(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_from_bits(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}
// Round-to-nearest-even to bfloat16 (NaN stays NaN), returned as a float.
inline float round_bf16(float x) {
  return bf16_from_bits(bf16_bits(x));
}
// Rounds to the dtype: identity for kF32.
inline float round_to(DType dtype, float x) {
  return dtype == DType::kBF16 ? round_bf16(x) : x;
}
bool exact_in(DType dtype, double x);  // x is representable in dtype (and in fp32)

// fp32 activations, written as ATen's CPU kernels write them.
float silu(float x);  // x / (1 + exp(-x))
// silu applied to a bf16 tensor by torch 1.13's CPU kernel (Debian's, which the
// prototype measured): every intermediate (exp, 1 + e, the quotient) is rounded
// to bf16, so silu(x) == x exactly from 5.5625. Newer torch computes in fp32 and
// rounds once; both agree on every value a circuit produces (K·n, <= -89).
float silu_bf16(float x);
// silu as a tensor of `dtype` computes it.
inline float silu_in(DType dtype, float x) {
  return dtype == DType::kBF16 ? silu_bf16(x) : silu(x);
}
float sigmoid(float x);   // 1 / (1 + exp(-x))
float softplus(float x);  // x > 20 ? x : log1p(exp(x)); log1p of the smallest denormal gives 0 as on CPU torch
float rsqrt(float x);     // 1 / sqrt(x), two roundings (vectorised ATen)

// Gains and constants every construction uses (NUMERICS.md §1, §7).
inline constexpr double kGain = 128;           // K, A, B, Z: powers of two >= 88.73
inline constexpr double kValueUnit = 64;       // U: a stored 1 in a Gated DeltaNet row (silu's identity range)
inline constexpr double kResidualUnit = 8;     // u: a residual 1 bit; mean(x^2) = u^2 = 64
inline constexpr double kClearA = 256;       // Circuit::ram_clear: the decay input is ±256 (224 after dt_bias)
inline constexpr double kDtBias = -32;         // decay exactly 1 with A_log = 0 (needs <= -17.33)
inline constexpr double kEnableGain = 131072;  // 2^17 on an enable's negative rail: MLP neuron off on other tokens
inline constexpr float kEps = 1e-6f;           // rms_norm_eps of every Qwen3.5 norm

}  // namespace qgpu::weights
