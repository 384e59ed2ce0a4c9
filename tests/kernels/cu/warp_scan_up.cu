// Inclusive scan within groups of 4 lanes with __shfl_up_sync.
extern "C" __global__ void warp_scan_up(int* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 3;
  int v = x[i];
  for (int off = 1; off < 4; off <<= 1) {
    int t = __shfl_up_sync(0xffffffff, v, off, 4);
    if (lane >= off) v += t;
  }
  x[i] = v;
}
