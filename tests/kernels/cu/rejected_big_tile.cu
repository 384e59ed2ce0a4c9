// REJECTED: 64 words of shared memory per block, the machine has 32.
extern "C" __global__ void big_tile(const int* x, int* out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  s[t + 32] = -x[t];
  __syncthreads();
  out[t] = s[(t + 5) % 64] + s[63 - t];
}
