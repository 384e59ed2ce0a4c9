// __shfl_sync with a constant source lane (broadcast) and a lane-dependent one (rotate).
extern "C" __global__ void warp_shfl_idx(const int* x, int* bcast, int* rot) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 3;
  int v = x[i];
  bcast[i] = __shfl_sync(0xf, v, 2, 4);
  rot[i] = __shfl_sync(0xf, v, (lane + 1) & 3, 4);
}
