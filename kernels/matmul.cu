// matmul(A, B): C = A B for A m x k and B k x p, row-major, each C[r][c] an exact sum. *overflow
// (0 before the launch) is set to 1 when any element (or a product) is outside int32. Launch: one
// block per row (grid >= m) and one thread per column (block >= p): any loop over rows or columns
// would need more than the machine's 15 registers, and a thread index split by division costs more.
#include "int32_checked.cuh"

extern "C" __global__ void matmul(const int* A, const int* B, int m, int k, int p, int* C, int* overflow) {
  int r = blockIdx.x, c = threadIdx.x;
  if (r >= m || c >= p) return;
  WideSum w = wide_zero();
#pragma unroll 1
  for (int j = 0; j < k; ++j) wide_add_product(&w, A[r * k + j], B[j * p + c]);
  C[r * p + c] = w.lo;
  if (wide_overflow(w)) atomicOr(overflow, 1);
}
