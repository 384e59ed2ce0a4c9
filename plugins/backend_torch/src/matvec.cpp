// See matvec.h. The kernel is compiled for AVX512-BF16 with a function target
// attribute and only called after a runtime CPU check, so the rest of the
// plugin keeps the baseline ISA.
#include "matvec.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define QGPU_MATVEC_X86 1
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace qgpu::torch_backend::matvec {
namespace {

#ifdef QGPU_MATVEC_X86

// AVX512F (and AVX512BW for the masked 16-bit loads) from CPUID, and the OS
// saving the zmm/opmask state (XCR0 bits 1, 2, 5, 6, 7).
bool detect_avx512() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xE6u) != 0xE6u) return false;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX512F) && (b & bit_AVX512BW);
}

bool detect_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!detect_avx512() || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a & (1u << 5)) != 0;  // CPUID.(EAX=7, ECX=1):EAX[5] = AVX512_BF16
}

constexpr std::int64_t kLanes = 32;  // bf16 values per 512-bit load

#define QGPU_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

QGPU_AVX512_BF16 inline __m512bh load_bf16(const std::uint16_t* p) {
  return (__m512bh)_mm512_loadu_si512(p);
}
QGPU_AVX512_BF16 inline __m512bh load_bf16_tail(const std::uint16_t* p, __mmask32 mask) {
  return (__m512bh)_mm512_maskz_loadu_epi16(mask, p);
}

// Rows [begin, end) of y = W x. Four rows share each load of x and keep four
// independent accumulator chains; vdpbf16ps adds the two exact pair products
// of each fp32 lane in turn (and flushes denormals, which bf16 activations and
// weights of a trained model do not reach).
QGPU_AVX512_BF16 void rows_avx512_bf16(const std::uint16_t* w, const std::uint16_t* x, std::int64_t in,
                                       std::int64_t begin, std::int64_t end, c10::BFloat16* y) {
  const std::int64_t full = in / kLanes * kLanes;
  const __mmask32 tail = static_cast<__mmask32>((1ull << (in - full)) - 1);
  std::int64_t n = begin;
  for (; n + 4 <= end; n += 4) {
    const std::uint16_t* w0 = w + n * in;
    const std::uint16_t* w1 = w0 + in;
    const std::uint16_t* w2 = w1 + in;
    const std::uint16_t* w3 = w2 + in;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += kLanes) {
      const __m512bh xv = load_bf16(x + k);
      s0 = _mm512_dpbf16_ps(s0, load_bf16(w0 + k), xv);
      s1 = _mm512_dpbf16_ps(s1, load_bf16(w1 + k), xv);
      s2 = _mm512_dpbf16_ps(s2, load_bf16(w2 + k), xv);
      s3 = _mm512_dpbf16_ps(s3, load_bf16(w3 + k), xv);
    }
    if (tail) {
      const __m512bh xv = load_bf16_tail(x + full, tail);
      s0 = _mm512_dpbf16_ps(s0, load_bf16_tail(w0 + full, tail), xv);
      s1 = _mm512_dpbf16_ps(s1, load_bf16_tail(w1 + full, tail), xv);
      s2 = _mm512_dpbf16_ps(s2, load_bf16_tail(w2 + full, tail), xv);
      s3 = _mm512_dpbf16_ps(s3, load_bf16_tail(w3 + full, tail), xv);
    }
    y[n] = c10::BFloat16(_mm512_reduce_add_ps(s0));
    y[n + 1] = c10::BFloat16(_mm512_reduce_add_ps(s1));
    y[n + 2] = c10::BFloat16(_mm512_reduce_add_ps(s2));
    y[n + 3] = c10::BFloat16(_mm512_reduce_add_ps(s3));
  }
  for (; n < end; ++n) {
    const std::uint16_t* w0 = w + n * in;
    __m512 s0 = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += kLanes) s0 = _mm512_dpbf16_ps(s0, load_bf16(w0 + k), load_bf16(x + k));
    if (tail) s0 = _mm512_dpbf16_ps(s0, load_bf16_tail(w0 + full, tail), load_bf16_tail(x + full, tail));
    y[n] = c10::BFloat16(_mm512_reduce_add_ps(s0));
  }
}

// The fp32 twin for f32 models: 16 floats per load, fused multiply-add.
__attribute__((target("avx512f"))) void rows_avx512_f32(const float* w, const float* x, std::int64_t in,
                                                        std::int64_t begin, std::int64_t end, float* y) {
  const std::int64_t full = in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1);
  std::int64_t n = begin;
  for (; n + 4 <= end; n += 4) {
    const float* w0 = w + n * in;
    const float* w1 = w0 + in;
    const float* w2 = w1 + in;
    const float* w3 = w2 + in;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += 16) {
      const __m512 xv = _mm512_loadu_ps(x + k);
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k), xv, s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k), xv, s1);
      s2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k), xv, s2);
      s3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k), xv, s3);
    }
    if (tail) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + full);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + full), xv, s0);
      s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w1 + full), xv, s1);
      s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w2 + full), xv, s2);
      s3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w3 + full), xv, s3);
    }
    y[n] = _mm512_reduce_add_ps(s0);
    y[n + 1] = _mm512_reduce_add_ps(s1);
    y[n + 2] = _mm512_reduce_add_ps(s2);
    y[n + 3] = _mm512_reduce_add_ps(s3);
  }
  for (; n < end; ++n) {
    const float* w0 = w + n * in;
    __m512 s0 = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += 16)
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k), _mm512_loadu_ps(x + k), s0);
    if (tail) s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w0 + full), _mm512_maskz_loadu_ps(tail, x + full), s0);
    y[n] = _mm512_reduce_add_ps(s0);
  }
}

// Rows [begin, end) of Y = X Wᵀ for G rows of x (row g at x + g·ldx, its outputs at y + g·out).
// Each W row is loaded once for all G rows, which is what makes a few rows cost about what one
// does; the loops over g unroll fully, so the 2·G accumulators stay in registers. Every output is the one-row kernels' own chain above (the same lanes, the same order of
// multiply-adds, the same final tree), so a row's result is bit for bit what the one-row call
// gives, whatever the rows beside it.
template <int G>
__attribute__((target("avx512f"))) void group_avx512_f32(const float* w, const float* x, std::int64_t ldx,
                                                         std::int64_t in, std::int64_t begin, std::int64_t end, float* y,
                                                         std::int64_t out) {
  const std::int64_t full = in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1);
  std::int64_t n = begin;
  for (; n + 2 <= end; n += 2) {
    const float* w0 = w + n * in;
    const float* w1 = w0 + in;
    __m512 a[G], b[G];
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) a[g] = b[g] = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += 16) {
      const __m512 v0 = _mm512_loadu_ps(w0 + k), v1 = _mm512_loadu_ps(w1 + k);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const __m512 xv = _mm512_loadu_ps(x + g * ldx + k);
        a[g] = _mm512_fmadd_ps(v0, xv, a[g]);
        b[g] = _mm512_fmadd_ps(v1, xv, b[g]);
      }
    }
    if (tail) {
      const __m512 v0 = _mm512_maskz_loadu_ps(tail, w0 + full), v1 = _mm512_maskz_loadu_ps(tail, w1 + full);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const __m512 xv = _mm512_maskz_loadu_ps(tail, x + g * ldx + full);
        a[g] = _mm512_fmadd_ps(v0, xv, a[g]);
        b[g] = _mm512_fmadd_ps(v1, xv, b[g]);
      }
    }
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      y[g * out + n] = _mm512_reduce_add_ps(a[g]);
      y[g * out + n + 1] = _mm512_reduce_add_ps(b[g]);
    }
  }
  for (; n < end; ++n) {
    const float* w0 = w + n * in;
    __m512 a[G];
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) a[g] = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += 16) {
      const __m512 v0 = _mm512_loadu_ps(w0 + k);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) a[g] = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x + g * ldx + k), a[g]);
    }
    if (tail) {
      const __m512 v0 = _mm512_maskz_loadu_ps(tail, w0 + full);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) a[g] = _mm512_fmadd_ps(v0, _mm512_maskz_loadu_ps(tail, x + g * ldx + full), a[g]);
    }
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) y[g * out + n] = _mm512_reduce_add_ps(a[g]);
  }
}

// The bf16 twin (vdpbf16ps, rounded once to bf16), same structure.
template <int G>
QGPU_AVX512_BF16 void group_avx512_bf16(const std::uint16_t* w, const std::uint16_t* x, std::int64_t ldx,
                                        std::int64_t in, std::int64_t begin, std::int64_t end, c10::BFloat16* y, std::int64_t out) {
  const std::int64_t full = in / kLanes * kLanes;
  const __mmask32 tail = static_cast<__mmask32>((1ull << (in - full)) - 1);
  std::int64_t n = begin;
  for (; n + 2 <= end; n += 2) {
    const std::uint16_t* w0 = w + n * in;
    const std::uint16_t* w1 = w0 + in;
    __m512 a[G], b[G];
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) a[g] = b[g] = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += kLanes) {
      const __m512bh v0 = load_bf16(w0 + k), v1 = load_bf16(w1 + k);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const __m512bh xv = load_bf16(x + g * ldx + k);
        a[g] = _mm512_dpbf16_ps(a[g], v0, xv);
        b[g] = _mm512_dpbf16_ps(b[g], v1, xv);
      }
    }
    if (tail) {
      const __m512bh v0 = load_bf16_tail(w0 + full, tail), v1 = load_bf16_tail(w1 + full, tail);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) {
        const __m512bh xv = load_bf16_tail(x + g * ldx + full, tail);
        a[g] = _mm512_dpbf16_ps(a[g], v0, xv);
        b[g] = _mm512_dpbf16_ps(b[g], v1, xv);
      }
    }
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      y[g * out + n] = c10::BFloat16(_mm512_reduce_add_ps(a[g]));
      y[g * out + n + 1] = c10::BFloat16(_mm512_reduce_add_ps(b[g]));
    }
  }
  for (; n < end; ++n) {
    const std::uint16_t* w0 = w + n * in;
    __m512 a[G];
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) a[g] = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < full; k += kLanes) {
      const __m512bh v0 = load_bf16(w0 + k);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) a[g] = _mm512_dpbf16_ps(a[g], v0, load_bf16(x + g * ldx + k));
    }
    if (tail) {
      const __m512bh v0 = load_bf16_tail(w0 + full, tail);
      #pragma GCC unroll 8
      for (int g = 0; g < G; ++g) a[g] = _mm512_dpbf16_ps(a[g], v0, load_bf16_tail(x + g * ldx + full, tail));
    }
    #pragma GCC unroll 8
    for (int g = 0; g < G; ++g) y[g * out + n] = c10::BFloat16(_mm512_reduce_add_ps(a[g]));
  }
}

// Rows [begin, end) of the outputs for x's `rows` rows (ldx apart), in groups of at most kGroup.
constexpr std::int64_t kGroup = 8;

template <typename T, typename Y>
void rows_grouped(const T* w, const T* x, std::int64_t ldx, std::int64_t rows, std::int64_t in, std::int64_t begin,
                  std::int64_t end, Y* y, std::int64_t out) {
  for (std::int64_t m = 0; m < rows; m += kGroup) {
    const T* xg = x + m * ldx;
    Y* yg = y + m * out;
    const auto run = [&]<int G>() {
      if constexpr (std::is_same_v<T, float>)
        group_avx512_f32<G>(w, xg, ldx, in, begin, end, yg, out);
      else
        group_avx512_bf16<G>(w, xg, ldx, in, begin, end, yg, out);
    };
    switch (std::min(kGroup, rows - m)) {
      case 1: run.template operator()<1>(); break;
      case 2: run.template operator()<2>(); break;
      case 3: run.template operator()<3>(); break;
      case 4: run.template operator()<4>(); break;
      case 5: run.template operator()<5>(); break;
      case 6: run.template operator()<6>(); break;
      case 7: run.template operator()<7>(); break;
      default: run.template operator()<8>(); break;
    }
  }
}

#endif  // QGPU_MATVEC_X86

}  // namespace

bool has_avx512_f32() {
#ifdef QGPU_MATVEC_X86
  static const bool has = detect_avx512();
  return has;
#else
  return false;
#endif
}

bool has_avx512_bf16() {
#ifdef QGPU_MATVEC_X86
  static const bool has = detect_avx512_bf16();
  return has;
#else
  return false;
#endif
}

bool applies(const at::Tensor& x, const at::Tensor& weight) {
  const auto dtype = x.scalar_type();
  if (dtype != weight.scalar_type() || !(dtype == at::kBFloat16 ? has_avx512_bf16()
                                         : dtype == at::kFloat  ? has_avx512_f32()
                                                                : false)) {
    return false;
  }
  return x.dim() >= 1 && x.size(-1) > 0 && x.numel() > 0 && x.numel() <= kMaxRows * x.size(-1) &&
         weight.dim() == 2 && weight.size(1) == x.size(-1) && weight.size(0) > 0 && x.device().is_cpu() &&
         weight.device().is_cpu() && weight.is_contiguous();
}

at::Tensor matvec(const at::Tensor& x, const at::Tensor& weight) {
  const std::int64_t out = weight.size(0), in = weight.size(1);
  auto sizes = x.sizes().vec();
  sizes.back() = out;
  auto y = at::empty(sizes, weight.options());
  const auto xc = x.contiguous();
  // At least ~64 KiB of weights per task, so small projections stay on one thread.
  const std::int64_t grain =
      std::max<std::int64_t>(4, (std::int64_t{1} << 16) / std::max<std::int64_t>(in * weight.element_size(), 1));
#ifdef QGPU_MATVEC_X86
  const std::int64_t rows = x.numel() / in;
  // Several rows: a copy with each row 64 bytes further along than its width. Rows a multiple of
  // 4 KiB apart (2,048 floats, 4,096 bf16 values) would all fall into the same L1 sets as each
  // other and as the weight rows, and evict one another at every step (measured 4x slower).
  const std::int64_t ldx = rows == 1 ? in : in + 64 / x.element_size();
  at::Tensor xs = xc;
  if (rows > 1) {
    xs = at::zeros({rows, ldx}, xc.options());
    xs.narrow(1, 0, in).copy_(xc.reshape({rows, in}));
  }
  if (x.scalar_type() == at::kBFloat16) {
    const auto* xp = reinterpret_cast<const std::uint16_t*>(xs.data_ptr<c10::BFloat16>());
    const auto* wp = reinterpret_cast<const std::uint16_t*>(weight.data_ptr<c10::BFloat16>());
    auto* yp = y.data_ptr<c10::BFloat16>();
    at::parallel_for(0, out, grain, [&](std::int64_t b, std::int64_t e) {
      if (rows == 1)
        rows_avx512_bf16(wp, xp, in, b, e, yp);
      else
        rows_grouped(wp, xp, ldx, rows, in, b, e, yp, out);
    });
  } else {
    const float* xp = xs.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, out, grain, [&](std::int64_t b, std::int64_t e) {
      if (rows == 1)
        rows_avx512_f32(wp, xp, in, b, e, yp);
      else
        rows_grouped(wp, xp, ldx, rows, in, b, e, yp, out);
    });
  }
#else
  TORCH_CHECK(false, "matvec: not built for this CPU");
#endif
  return y;
}

}  // namespace qgpu::torch_backend::matvec
