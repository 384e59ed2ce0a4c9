// cumsum(x): out[i] = x[0] + ... + x[i] (inclusive scan); *overflow = 1 when any prefix is outside
// int32 (each prefix is a result). One thread walks the vector: a scan is serial anyway and every
// prefix sum is then checked exactly. Launch: 1 block of 1 thread (other threads return).
#include "int32_checked.cuh"

extern "C" __global__ void cumsum(const int* x, int n, int* out, int* overflow) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int s = 0, ov = 0;
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    s = add_checked(s, x[i], &ov);
    out[i] = s;
  }
  overflow[0] = ov;
}
