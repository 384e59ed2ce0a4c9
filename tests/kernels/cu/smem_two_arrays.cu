// Two shared arrays (32 words together): pairwise min and max of neighbours.
extern "C" __global__ void smem_two_arrays(const int* x, int* lo, int* hi) {
  __shared__ int a[16];
  __shared__ int b[16];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  a[t] = x[i];
  b[t] = x[i] * 2;
  __syncthreads();
  int nb = (t + 1) % 16;
  lo[i] = min(a[t], b[nb]);
  hi[i] = max(a[nb], b[t]);
}
