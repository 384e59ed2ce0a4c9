// REJECTED: a 32-lane shuffle reduction (default width 32) depends on 32-lane warps.
extern "C" __global__ void warp_sum32(const int* x, int* sums) {
  int v = x[threadIdx.x];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
  if (threadIdx.x == 0) sums[0] = v;
}
