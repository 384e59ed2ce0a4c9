// The circuit engine's element-wise layer math on 16 lanes at a time: the conv's
// activations, the MLP's products, a Gated DeltaNet head's row updates and its
// gated norm's output. Each function computes, for every element, exactly the
// operations of its `_plain` twin (the scalar loop it replaces) in the same
// order, so the results are equal bit for bit (tests/reference_test.cpp). No
// sum is reordered: reductions that are not exact in any order stay scalar.
//
// The activations are where the lanes need care: silu is computed with the
// shortcuts numerics.cpp documents (x >= 32, x <= -104, and x = ±0, which
// silu keeps), which are where a circuit's switches and values sit; any other
// lane (a NaN, an infinity, a value in between) is computed by the scalar
// function itself. The lanes run where the CPU has AVX-512, else the plain
// loops run.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "qgpu/weights/numerics.h"

namespace qgpu::weights::reference {

// Whether the CPU has AVX-512 (the lanes' functions and the sliced product check it).
bool has_avx512();
// round_bf16 on 16 lanes: nearest, ties to even; a NaN stays a quiet NaN. AVX-512 CPUs only.
__attribute__((target("avx512f"))) __m512 round_bf16_lanes(__m512 x);

// The causal conv of channels whose only tap is the current token's, then SiLU:
// for each i, with c = channel[i]: conv = round(0 + projected[c]·tap[i]);
// projected[c] = conv; activated[c] = conv == 0 ? 0 : round(silu_in(dtype, conv)).
void direct_conv(const std::int32_t* channel, const float* tap, std::size_t n, float* projected, float* activated,
                 DType dtype);
void direct_conv_plain(const std::int32_t* channel, const float* tap, std::size_t n, float* projected,
                       float* activated, DType dtype);

// The smallest nonzero |x[index[i]]| over i in [0, n), +inf when there is none (NaN never
// counts); `at` gets the first index[i] that has it (-1 when none).
float smallest_magnitude(const float* x, const std::int32_t* index, std::size_t n, std::int32_t& at);
float smallest_magnitude_plain(const float* x, const std::int32_t* index, std::size_t n, std::int32_t& at);

// The MLP's products for neurons neuron[0..n): with g = gate[k], u = up[k] (k = neuron[i]),
// product[k] = 0 where u == 0 and |g| < 1e38, or g == 0 and u is finite; else
// round(round(silu_in(dtype, g))·u). smallest[k] becomes |g| where g != 0 and |g| < smallest[k].
// Returns the smallest nonzero |g| of them (+inf when none; NaN never counts).
float neuron_products(const std::int32_t* neuron, std::size_t n, const float* gate, const float* up, float* product,
                      double* smallest, DType dtype);
float neuron_products_plain(const std::int32_t* neuron, std::size_t n, const float* gate, const float* up,
                            float* product, double* smallest, DType dtype);

// y[j] = y[j] + x[j]·a for j in [0, n) (a multiply, then an add: never fused).
void add_scaled(float* y, const float* x, float a, std::int64_t n);
void add_scaled_plain(float* y, const float* x, float a, std::int64_t n);
// y[j] = y[j]·a.
void scale(float* y, float a, std::int64_t n);
void scale_plain(float* y, float a, std::int64_t n);
// y[j] = round(x[j]·a) to the dtype: an RMSNorm's output without weight.
void scale_rounded(const float* x, float a, float* y, std::int64_t n, DType dtype);
void scale_rounded_plain(const float* x, float a, float* y, std::int64_t n, DType dtype);
// y[j] = (v[j] - y[j])·a: the delta rule's correction of a read row.
void correct(float* y, const float* v, float a, std::int64_t n);
void correct_plain(float* y, const float* v, float a, std::int64_t n);

// A head's read-out rounded to the dtype in place, and the sum of its nonzero elements' squares
// added in order (o[0]² first): the gated norm's sum.
float round_and_sum_squares(float* o, std::int64_t n, DType dtype);
float round_and_sum_squares_plain(float* o, std::int64_t n, DType dtype);
// The smallest nonzero |x[j]| for j in [0, n), +inf when there is none (NaN never counts).
float smallest_magnitude(const float* x, std::int64_t n);
float smallest_magnitude_plain(const float* x, std::int64_t n);

// Qwen3_5RMSNormGated's output of one head, given its read-out o (already rounded to the
// dtype) and 1/rms rr: out[j] = 0 where o[j] == 0, else round(round(weight·round(o[j]·rr))·silu(z[j]))
// with silu in fp32 (whatever the dtype).
void gated_output(const float* o, const float* z, float rr, float weight, std::int64_t n, float* out, DType dtype);
void gated_output_plain(const float* o, const float* z, float rr, float weight, std::int64_t n, float* out,
                        DType dtype);

}  // namespace qgpu::weights::reference
