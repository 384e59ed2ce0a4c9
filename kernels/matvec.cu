// matvec(A, x): y = A x for a rows x cols row-major matrix, each y[r] an exact sum. *overflow (0
// before the launch) is set to 1 when any y[r] (or a product) is outside int32. Launch: at least
// `rows` threads in all, one per row (a row loop would need more than the machine's 15 registers).
#include "int32_checked.cuh"

extern "C" __global__ void matvec(const int* A, const int* x, int rows, int cols, int* y, int* overflow) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  WideSum w = wide_zero();
#pragma unroll 1
  for (int c = 0; c < cols; ++c) wide_add_product(&w, A[r * cols + c], x[c]);
  y[r] = w.lo;
  if (wide_overflow(w)) atomicOr(overflow, 1);
}
