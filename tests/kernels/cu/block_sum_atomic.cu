// Shared-memory reduction per block, then one atomicAdd per block into the total.
extern "C" __global__ void block_sum_atomic(const int* x, int n, int* total) {
  __shared__ int s[8];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] : 0;
  __syncthreads();
  for (int stride = 4; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) atomicAdd(total, s[0]);
}
