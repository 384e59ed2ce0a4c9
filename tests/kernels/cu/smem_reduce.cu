// Classic shared-memory tree reduction with __syncthreads; one partial sum per block.
extern "C" __global__ void smem_reduce(const int* x, int* block_sums) {
  __shared__ int s[32];
  unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) block_sums[blockIdx.x] = s[0];
}
