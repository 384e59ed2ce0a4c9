// Elementwise out[i] = a[i] OP b[i] for i < n: add, sub, mul. *overflow (0 before the launch) is
// set to 1 when any result is outside int32. Any 1-D launch: a grid-stride loop.
#include "int32_checked.cuh"

enum Op { kAdd, kSub, kMul };

template <Op kOp>
__device__ inline void elementwise(const int* a, const int* b, int n, int* out, int* overflow) {
  int ov = 0;
#pragma unroll 1
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int x = a[i], y = b[i];
    out[i] = kOp == kAdd ? add_checked(x, y, &ov) : kOp == kSub ? sub_checked(x, y, &ov) : mul_checked(x, y, &ov);
  }
  if (ov) atomicOr(overflow, 1);
}

extern "C" __global__ void add(const int* a, const int* b, int n, int* out, int* overflow) {
  elementwise<kAdd>(a, b, n, out, overflow);
}
extern "C" __global__ void sub(const int* a, const int* b, int n, int* out, int* overflow) {
  elementwise<kSub>(a, b, n, out, overflow);
}
extern "C" __global__ void mul(const int* a, const int* b, int n, int* out, int* overflow) {
  elementwise<kMul>(a, b, n, out, overflow);
}
