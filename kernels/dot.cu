// dot(a, b) = sum of a[i] * b[i] for i < n, exact: *out gets the dot product and *overflow 1 when
// it is outside int32 (or a product is; *out is then meaningless). Launch: 1 block of at most 8
// threads (the library uses 4, one warp); each thread sums a strided part, thread 0 adds the parts.
#include "int32_checked.cuh"

extern "C" __global__ void dot(const int* a, const int* b, int n, int* out, int* overflow) {
  __shared__ int part_lo[8], part_hi[8];
  WideSum w = wide_zero();
#pragma unroll 1
  for (int i = threadIdx.x; i < n; i += blockDim.x) wide_add_product(&w, a[i], b[i]);
  wide_block_store(w, part_lo, part_hi, out, overflow);
}
