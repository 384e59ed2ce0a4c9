// Sum of each 4-thread block with __shfl_down_sync (mask 0xf names all 4 lanes of the block).
extern "C" __global__ void warp_reduce_down(const int* x, int* sums) {
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int off = 2; off > 0; off >>= 1) v += __shfl_down_sync(0xf, v, off, 4);
  if (threadIdx.x == 0) sums[blockIdx.x] = v;
}
