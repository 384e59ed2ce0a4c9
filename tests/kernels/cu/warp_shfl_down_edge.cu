// Shuffle down/up past the edge of the 4-lane segment returns the caller's own value.
extern "C" __global__ void warp_shfl_down_edge(const int* x, int* down3, int* up2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  down3[i] = __shfl_down_sync(0xffffffff, v, 3, 4);
  up2[i] = __shfl_up_sync(0xffffffff, v, 2, 4);
}
