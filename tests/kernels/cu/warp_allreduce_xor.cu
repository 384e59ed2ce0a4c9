// Butterfly all-reduce (sum and max) within groups of 4 lanes of a full 32-thread block.
extern "C" __global__ void warp_allreduce_xor(const int* x, int* sum, int* mx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int s = x[i], m = x[i];
  for (int lm = 1; lm < 4; lm <<= 1) {
    s += __shfl_xor_sync(0xffffffff, s, lm, 4);
    m = max(m, __shfl_xor_sync(0xffffffff, m, lm, 4));
  }
  sum[i] = s;
  mx[i] = m;
}
