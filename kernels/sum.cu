// sum(x) = x[0] + ... + x[n-1], exact: *out gets the sum and *overflow 1 when it is outside int32
// (partial sums may leave int32 and come back). Launch: 1 block of at most 8 threads (the library
// uses 4); each thread sums a strided part, thread 0 adds the parts.
#include "int32_checked.cuh"

extern "C" __global__ void sum(const int* x, int n, int* out, int* overflow) {
  __shared__ int part_lo[8], part_hi[8];
  WideSum w = wide_zero();
#pragma unroll 1
  for (int i = threadIdx.x; i < n; i += blockDim.x) wide_add(&w, x[i]);
  wide_block_store(w, part_lo, part_hi, out, overflow);
}
