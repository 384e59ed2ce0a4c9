#include "lanes.h"

#include <immintrin.h>

#include <cmath>
#include <limits>

namespace qgpu::weights::reference {

// ---- The plain loops: the definitions the lanes reproduce. ----

void direct_conv_plain(const std::int32_t* channel, const float* tap, std::size_t n, float* projected,
                       float* activated, DType dtype) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = static_cast<std::size_t>(channel[i]);
    const float conv = round_to(dtype, 0.0f + projected[c] * tap[i]);
    projected[c] = conv;
    activated[c] = conv == 0 ? 0.0f : round_to(dtype, silu_in(dtype, conv));
  }
}

float smallest_magnitude_plain(const float* x, const std::int32_t* index, std::size_t n, std::int32_t& at) {
  float lo = std::numeric_limits<float>::infinity();
  at = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[index[i]]);
    if (a != 0 && a < lo) {
      lo = a;
      at = index[i];
    }
  }
  return lo;
}

namespace {
bool product_is_zero(float g, float u) {
  // silu(g)·u with u == 0 (or g == 0, silu 0) is a zero of either sign when the other factor is
  // finite (|g| < 1e38: silu(g) rounded to bf16 cannot overflow), and a zero of either sign adds
  // nothing to down's sums.
  return (u == 0 && std::fabs(g) < 1e38f) || (g == 0 && std::isfinite(u));
}
}  // namespace

float neuron_products_plain(const std::int32_t* neuron, std::size_t n, const float* gate, const float* up,
                            float* product, double* smallest, DType dtype) {
  float lo = std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = static_cast<std::size_t>(neuron[i]);
    const float g = gate[k], u = up[k], a = std::fabs(g);
    if (g != 0 && a < smallest[k]) smallest[k] = a;
    if (g != 0 && a < lo) lo = a;
    product[k] = product_is_zero(g, u) ? 0.0f : round_to(dtype, round_to(dtype, silu_in(dtype, g)) * u);
  }
  return lo;
}

void add_scaled_plain(float* y, const float* x, float a, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) y[j] += x[j] * a;
}

void scale_plain(float* y, float a, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) y[j] *= a;
}

void scale_rounded_plain(const float* x, float a, float* y, std::int64_t n, DType dtype) {
  for (std::int64_t j = 0; j < n; ++j) y[j] = round_to(dtype, x[j] * a);
}

void correct_plain(float* y, const float* v, float a, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) y[j] = (v[j] - y[j]) * a;
}

void gated_output_plain(const float* o, const float* z, float rr, float weight, std::int64_t n, float* out,
                        DType dtype) {
  for (std::int64_t j = 0; j < n; ++j) {
    if (o[j] == 0) {
      out[j] = 0;
      continue;
    }
    const float y1 = round_to(dtype, weight * round_to(dtype, o[j] * rr));
    out[j] = round_to(dtype, y1 * silu(z[j]));
  }
}

float round_and_sum_squares_plain(float* o, std::int64_t n, DType dtype) {
  float ss = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    o[j] = round_to(dtype, o[j]);
    if (o[j] != 0) ss += o[j] * o[j];
  }
  return ss;
}

float smallest_magnitude_plain(const float* x, std::int64_t n) {
  float lo = std::numeric_limits<float>::infinity();
  for (std::int64_t j = 0; j < n; ++j) {
    const float a = std::fabs(x[j]);
    lo = a != 0 && a < lo ? a : lo;
  }
  return lo;
}

// ---- The lanes. ----

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

__attribute__((target("avx512f"))) __m512 round_bf16_lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  // (The masked shift with every lane on is the plain one, without GCC 12's maybe-uninitialized
  // warning on the unmasked form.)
  const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, u, 16), _mm512_set1_epi32(1));
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), high);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_and_si512(u, high), _mm512_set1_epi32(0x400000)));
  return _mm512_castsi512_ps(r);
}

namespace {

constexpr int kLanes = 16;

// The lanes of the first `n` (<= 16).
__mmask16 first(std::int64_t n) {
  return n >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}


// The smallest lane (none is NaN). (GCC 12's _mm512_reduce_min_ps warns on an undefined source.)
// 16 lanes of x at indices c (ascending, distinct: lanes `m` of index + i). Where the 16 indices
// are consecutive (the usual case: a unit's channels and neurons sit together) a plain load,
// else a gather; `put` writes back the same way.
struct Indices {
  __m512i c;
  __mmask16 m;
  std::int32_t first = -1;  // the first index where all 16 are consecutive, else -1
};
__attribute__((target("avx512f"), always_inline)) inline Indices indices(const std::int32_t* index, std::size_t i, std::size_t n) {
  Indices at;
  at.m = first(static_cast<std::int64_t>(n - i));
  at.c = _mm512_maskz_loadu_epi32(at.m, index + i);
  if (n - i >= kLanes && index[i + kLanes - 1] - index[i] == kLanes - 1) at.first = index[i];
  return at;
}
__attribute__((target("avx512f"), always_inline)) inline __m512 take(const Indices& at, const float* x) {
  return at.first >= 0 ? _mm512_loadu_ps(x + at.first) : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), at.m, at.c, x, 4);
}
__attribute__((target("avx512f"), always_inline)) inline void put(const Indices& at, float* x, __m512 v) {
  if (at.first >= 0)
    _mm512_storeu_ps(x + at.first, v);
  else
    _mm512_mask_i32scatter_ps(x, at.m, at.c, v, 4);
}

__attribute__((target("avx512f"))) float smallest_lane(__m512 x) {
  alignas(64) float v[kLanes];
  _mm512_store_ps(v, x);
  float lo = v[0];
  for (int lane = 1; lane < kLanes; ++lane) lo = v[lane] < lo ? v[lane] : lo;
  return lo;
}

__attribute__((target("avx512f"))) __m512 round_lanes(DType dtype, __m512 x) {
  return dtype == DType::kBF16 ? round_bf16_lanes(x) : x;
}

__attribute__((target("avx512f"))) __m512 abs_lanes(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
}

// silu of each lane as `scalar` (silu or silu_bf16) computes it. Lanes at x >= 32 give x (rounded
// to bf16 by silu_bf16), lanes at -max <= x <= -104 give -0, lanes at ±0 give x (0 / 2); the others
// are computed by `scalar` itself.
template <float (*scalar)(float), bool kBf16>
__attribute__((target("avx512f"))) __m512 silu_lanes(__m512 x) {
  const __mmask16 above = _mm512_cmp_ps_mask(x, _mm512_set1_ps(32.0f), _CMP_GE_OQ);
  const __mmask16 below = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LE_OQ) &
                          _mm512_cmp_ps_mask(x, _mm512_set1_ps(-std::numeric_limits<float>::max()), _CMP_GE_OQ);
  const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);
  __m512 y = kBf16 ? round_bf16_lanes(x) : x;  // the above and zero lanes (bf16 rounding keeps ±0)
  y = _mm512_mask_mov_ps(y, below, _mm512_set1_ps(-0.0f));
  const __mmask16 rest = static_cast<__mmask16>(~(above | below | zero));
  if (rest != 0) {
    alignas(64) float v[kLanes];
    _mm512_store_ps(v, x);
    alignas(64) float r[kLanes];
    _mm512_store_ps(r, y);
    for (unsigned m = rest; m != 0; m &= m - 1) {
      const int lane = __builtin_ctz(m);
      r[lane] = scalar(v[lane]);
    }
    y = _mm512_load_ps(r);
  }
  return y;
}

__attribute__((target("avx512f"))) __m512 silu_in_lanes(DType dtype, __m512 x) {
  return dtype == DType::kBF16 ? silu_lanes<silu_bf16, true>(x) : silu_lanes<silu, false>(x);
}

__attribute__((target("avx512f"))) void direct_conv_avx512(const std::int32_t* channel, const float* tap,
                                                            std::size_t n, float* projected, float* activated,
                                                            DType dtype) {
  for (std::size_t i = 0; i < n; i += kLanes) {
    const Indices at = indices(channel, i, n);
    const __m512 p = take(at, projected);
    const __m512 conv = round_lanes(
        dtype, _mm512_add_ps(_mm512_setzero_ps(), _mm512_mul_ps(p, _mm512_maskz_loadu_ps(at.m, tap + i))));
    const __mmask16 nonzero = _mm512_mask_cmp_ps_mask(at.m, conv, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    __m512 act = _mm512_setzero_ps();
    if (nonzero != 0) act = _mm512_maskz_mov_ps(nonzero, round_lanes(dtype, silu_in_lanes(dtype, conv)));
    put(at, projected, conv);
    put(at, activated, act);
  }
}

__attribute__((target("avx512f"))) float smallest_magnitude_avx512(const float* x, const std::int32_t* index,
                                                                   std::size_t n, std::int32_t& where) {
  const float inf = std::numeric_limits<float>::infinity();
  __m512 lo = _mm512_set1_ps(inf);
  for (std::size_t i = 0; i < n; i += kLanes) {
    const Indices at = indices(index, i, n);
    const __m512 a = abs_lanes(take(at, x));
    // Nonzero and below the lane's smallest (false for NaN): min is exact, so any order gives it.
    const __mmask16 less = _mm512_mask_cmp_ps_mask(at.m, a, _mm512_setzero_ps(), _CMP_NEQ_OQ) &
                           _mm512_cmp_ps_mask(a, lo, _CMP_LT_OQ);
    lo = _mm512_mask_mov_ps(lo, less, a);
  }
  const float smallest = smallest_lane(lo);
  where = -1;
  if (smallest == inf) return smallest;
  for (std::size_t i = 0; i < n; ++i)  // the first that has it
    if (std::fabs(x[index[i]]) == smallest) {
      where = index[i];
      break;
    }
  return smallest;
}

// smallest[k] = |g| where that is lower, for the neurons of lanes [8·kHalf, 8·kHalf + 8) in `live`
// (the minima are doubles: eight lanes at a time).
template <int kHalf>
__attribute__((target("avx512f"))) void lower_smallest(const Indices& at, __m512 a, __mmask16 live, double* smallest) {
  const __mmask8 mine = static_cast<__mmask8>(live >> (8 * kHalf));
  if (mine == 0) return;
  // (The masked forms with every lane on: GCC 12 warns on the unmasked ones' undefined source.)
  const __m512d ad =
      _mm512_maskz_cvtps_pd(0xFF, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(a), kHalf)));
  if (at.first >= 0) {
    double* row = smallest + at.first + 8 * kHalf;
    _mm512_mask_storeu_pd(row, _mm512_mask_cmp_pd_mask(mine, ad, _mm512_loadu_pd(row), _CMP_LT_OQ), ad);
    return;
  }
  const __m256i k = _mm512_maskz_extracti64x4_epi64(0xFF, at.c, kHalf);
  const __m512d now = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), mine, k, smallest, 8);
  _mm512_mask_i32scatter_pd(smallest, _mm512_mask_cmp_pd_mask(mine, ad, now, _CMP_LT_OQ), k, ad, 8);
}

__attribute__((target("avx512f"))) float neuron_products_avx512(const std::int32_t* neuron, std::size_t n,
                                                                const float* gate, const float* up, float* product,
                                                                double* smallest, DType dtype) {
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  __m512 lo = inf;
  for (std::size_t i = 0; i < n; i += kLanes) {
    const Indices at = indices(neuron, i, n);
    const __m512 g = take(at, gate), u = take(at, up);
    const __m512 a = abs_lanes(g);
    const __mmask16 nonzero = _mm512_mask_cmp_ps_mask(at.m, g, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    lo = _mm512_mask_mov_ps(lo, nonzero & _mm512_cmp_ps_mask(a, lo, _CMP_LT_OQ), a);
    lower_smallest<0>(at, a, nonzero, smallest);
    lower_smallest<1>(at, a, nonzero, smallest);
    // The zero products (see product_is_zero).
    const __mmask16 finite_u = _mm512_cmp_ps_mask(abs_lanes(u), inf, _CMP_LT_OQ);
    const __mmask16 zero =
        (_mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_EQ_OQ) & _mm512_cmp_ps_mask(a, _mm512_set1_ps(1e38f), _CMP_LT_OQ)) |
        (_mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_EQ_OQ) & finite_u);
    const __mmask16 live = at.m & static_cast<__mmask16>(~zero);
    __m512 p = _mm512_setzero_ps();
    if (live != 0)
      p = _mm512_maskz_mov_ps(
          live, round_lanes(dtype, _mm512_mul_ps(round_lanes(dtype, silu_in_lanes(dtype, _mm512_maskz_mov_ps(live, g))), u)));
    put(at, product, p);
  }
  return smallest_lane(lo);
}

__attribute__((target("avx512f"))) void add_scaled_avx512(float* y, const float* x, float a, std::int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 m = first(n - j);
    _mm512_mask_storeu_ps(y + j, m,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + j), _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), av)));
  }
}

__attribute__((target("avx512f"))) void scale_avx512(float* y, float a, std::int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 m = first(n - j);
    _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + j), av));
  }
}

__attribute__((target("avx512f"))) void scale_rounded_avx512(const float* x, float a, float* y, std::int64_t n,
                                                              DType dtype) {
  const __m512 av = _mm512_set1_ps(a);
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 m = first(n - j);
    _mm512_mask_storeu_ps(y + j, m, round_lanes(dtype, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), av)));
  }
}

__attribute__((target("avx512f"))) void correct_avx512(float* y, const float* v, float a, std::int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 m = first(n - j);
    _mm512_mask_storeu_ps(y + j, m,
                          _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + j), _mm512_maskz_loadu_ps(m, y + j)), av));
  }
}

__attribute__((target("avx512f"))) float round_and_sum_squares_avx512(float* o, std::int64_t n, DType dtype) {
  float ss = 0;
  alignas(64) float square[kLanes];
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 m = first(n - j);
    const __m512 v = round_lanes(dtype, _mm512_maskz_loadu_ps(m, o + j));
    _mm512_mask_storeu_ps(o + j, m, v);
    const __mmask16 nonzero = _mm512_mask_cmp_ps_mask(m, v, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    if (nonzero == 0) continue;
    _mm512_store_ps(square, _mm512_mul_ps(v, v));
    for (unsigned bits = nonzero; bits != 0; bits &= bits - 1) ss += square[__builtin_ctz(bits)];  // in order
  }
  return ss;
}

__attribute__((target("avx512f"))) float smallest_magnitude_avx512(const float* x, std::int64_t n) {
  __m512 lo = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 m = first(n - j);
    const __m512 a = abs_lanes(_mm512_maskz_loadu_ps(m, x + j));
    const __mmask16 less = _mm512_mask_cmp_ps_mask(m, a, _mm512_setzero_ps(), _CMP_NEQ_OQ) &
                           _mm512_cmp_ps_mask(a, lo, _CMP_LT_OQ);
    lo = _mm512_mask_mov_ps(lo, less, a);
  }
  return smallest_lane(lo);
}

__attribute__((target("avx512f"))) void gated_output_avx512(const float* o, const float* z, float rr, float weight,
                                                             std::int64_t n, float* out, DType dtype) {
  const __m512 rv = _mm512_set1_ps(rr), wv = _mm512_set1_ps(weight);
  for (std::int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 m = first(n - j);
    const __m512 ov = _mm512_maskz_loadu_ps(m, o + j);
    const __mmask16 live = _mm512_mask_cmp_ps_mask(m, ov, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    __m512 y = _mm512_setzero_ps();
    if (live != 0) {
      const __m512 y1 = round_lanes(dtype, _mm512_mul_ps(wv, round_lanes(dtype, _mm512_mul_ps(ov, rv))));
      // z where o is live (the others' silu is not needed: 0 keeps them cheap).
      const __m512 s = silu_lanes<silu, false>(_mm512_maskz_loadu_ps(live, z + j));
      y = _mm512_maskz_mov_ps(live, round_lanes(dtype, _mm512_mul_ps(y1, s)));
    }
    _mm512_mask_storeu_ps(out + j, m, y);
  }
}

}  // namespace

void direct_conv(const std::int32_t* channel, const float* tap, std::size_t n, float* projected, float* activated,
                 DType dtype) {
  if (has_avx512())
    direct_conv_avx512(channel, tap, n, projected, activated, dtype);
  else
    direct_conv_plain(channel, tap, n, projected, activated, dtype);
}

float smallest_magnitude(const float* x, const std::int32_t* index, std::size_t n, std::int32_t& at) {
  return has_avx512() ? smallest_magnitude_avx512(x, index, n, at) : smallest_magnitude_plain(x, index, n, at);
}

float neuron_products(const std::int32_t* neuron, std::size_t n, const float* gate, const float* up, float* product,
                      double* smallest, DType dtype) {
  return has_avx512() ? neuron_products_avx512(neuron, n, gate, up, product, smallest, dtype)
                      : neuron_products_plain(neuron, n, gate, up, product, smallest, dtype);
}

void add_scaled(float* y, const float* x, float a, std::int64_t n) {
  has_avx512() ? add_scaled_avx512(y, x, a, n) : add_scaled_plain(y, x, a, n);
}

void scale(float* y, float a, std::int64_t n) {
  has_avx512() ? scale_avx512(y, a, n) : scale_plain(y, a, n);
}

void scale_rounded(const float* x, float a, float* y, std::int64_t n, DType dtype) {
  has_avx512() ? scale_rounded_avx512(x, a, y, n, dtype) : scale_rounded_plain(x, a, y, n, dtype);
}

void correct(float* y, const float* v, float a, std::int64_t n) {
  has_avx512() ? correct_avx512(y, v, a, n) : correct_plain(y, v, a, n);
}

float round_and_sum_squares(float* o, std::int64_t n, DType dtype) {
  return has_avx512() ? round_and_sum_squares_avx512(o, n, dtype) : round_and_sum_squares_plain(o, n, dtype);
}

float smallest_magnitude(const float* x, std::int64_t n) {
  return has_avx512() ? smallest_magnitude_avx512(x, n) : smallest_magnitude_plain(x, n);
}

void gated_output(const float* o, const float* z, float rr, float weight, std::int64_t n, float* out, DType dtype) {
  has_avx512() ? gated_output_avx512(o, z, rr, weight, n, out, dtype)
               : gated_output_plain(o, z, rr, weight, n, out, dtype);
}

}  // namespace qgpu::weights::reference
