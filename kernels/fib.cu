// fib(x) elementwise: out[i] = F(x[i]) with F(0) = 0, F(1) = 1, for x[i] >= 0 (the caller checks).
// *overflow (0 before the launch) is set to 1 when a result is outside int32 (x[i] > 46); the loop
// stops there, so a huge x costs no more than x = 47. Any 1-D launch.
#include "int32_checked.cuh"

extern "C" __global__ void fib(const int* x, int n, int* out, int* overflow) {
  int ov = 0;
#pragma unroll 1
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    // (a, b) = (F(k), F(k + 1)), each with its overflow flag: F(k + 1) leaves int32 one step
    // before F(k) does, and only the result's own overflow counts.
    int nth = x[i], a = 0, b = 1, a_ov = 0, b_ov = 0;
#pragma unroll 1
    for (int k = 0; k < nth && !a_ov; ++k) {
      int t_ov = b_ov;
      int t = add_checked(a, b, &t_ov);
      a = b;
      a_ov = b_ov;
      b = t;
      b_ov = t_ov;
    }
    out[i] = a;
    ov |= a_ov;
  }
  if (ov) atomicOr(overflow, 1);
}
