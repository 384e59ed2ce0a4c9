// Hillis-Steele inclusive scan of one block in shared memory.
extern "C" __global__ void smem_scan(int* x) {
  __shared__ int s[32];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = x[i];
  __syncthreads();
  for (int off = 1; off < (int)blockDim.x; off <<= 1) {
    int add = t >= off ? s[t - off] : 0;
    __syncthreads();
    s[t] += add;
    __syncthreads();
  }
  x[i] = s[t];
}
