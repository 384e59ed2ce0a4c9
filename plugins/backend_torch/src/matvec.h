// One-row (and few-row) Linear (decode's mat-vec) on the CPU with AVX-512. LibTorch 1.13
// is slow there: a bf16 row goes through oneDNN's gemm and an fp32 row
// through BLAS gemv, both well below memory bandwidth for M = 1. A decode
// step streams every weight once, so the kernel only has to keep loads flowing.
#pragma once

#include <ATen/ATen.h>

namespace qgpu::torch_backend::matvec {

// Whether this CPU and OS run AVX512F + AVX512BW (the f32 kernel) and also
// AVX512_BF16 (vdpbf16ps, the bf16 kernel). Checked once, with CPUID/XGETBV.
bool has_avx512_f32();
bool has_avx512_bf16();

// The most rows of x matvec takes: a speculative verification's few positions (core's
// docs/SPECULATION.md) cost about what one does, each W row loaded once for a group of up
// to 8 rows. More rows go to the GEMM, whose packing of W pays off there.
constexpr std::int64_t kMaxRows = 16;

// Whether matvec takes (x, weight): x at most kMaxRows rows ([in], [1, in], [T, in],
// [1, T, in], any strides), weight [out, in] contiguous, both on the CPU in the same dtype, f32
// or bf16, and the CPU has that dtype's kernel.
bool applies(const at::Tensor& x, const at::Tensor& weight);

// y[t, n] = sum_k x[t, k] * weight[n, k], shaped like x with the last dimension out. Each
// row's outputs are bit for bit the ones x's row alone gives (the same chain per output).
// bf16: products exact in fp32 (bf16 x bf16), summed in fp32 (16 lanes of
// pairs, then a tree across lanes), rounded once to bf16 (to nearest even), as
// PyTorch's bf16 Linear does up to the summation order. f32: fused
// multiply-adds in 16 lanes, then a tree. Output rows are split over
// at::parallel_for (the backend's `threads`); each output comes from one
// thread, so the bits do not depend on the thread count. Requires applies().
at::Tensor matvec(const at::Tensor& x, const at::Tensor& weight);

}  // namespace qgpu::torch_backend::matvec
