// REJECTED: an 8-lane shuffle segment is wider than the machine's 4-lane warps.
extern "C" __global__ void swap8(const int* x, int* out) {
  int v = x[threadIdx.x];
  out[threadIdx.x] = __shfl_xor_sync(0xff, v, 4, 8);
}
