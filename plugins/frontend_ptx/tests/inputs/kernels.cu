// Realistic integer kernels, compiled by clang-16 (through the frontend) and by nvcc (committed .ptx).
__global__ void vec_add(const int* a, const int* b, int* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void grid_stride_scale(int* data, int n, int k) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) data[i] = data[i] * k + 1;
}

__global__ void dot(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, a[i] * b[i]);
}

__global__ void block_reduce(const int* in, int* out) {
  __shared__ int sdata[64];
  unsigned t = threadIdx.x;
  sdata[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) sdata[t] += sdata[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = sdata[0];
}

__global__ void warp_reduce4(const int* in, int* out) {
  int v = in[threadIdx.x];
  for (int d = 2; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d, 4);
  if ((threadIdx.x & 3) == 0) out[threadIdx.x / 4] = v;
}

__global__ void histogram(const unsigned* in, unsigned* bins, int n, unsigned nbins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[in[i] % nbins], 1u);
}

__global__ void collatz_steps(const int* in, int* out) {
  int x = in[threadIdx.x];
  int steps = 0;
  while (x > 1) {
    x = (x & 1) ? 3 * x + 1 : x / 2;
    ++steps;
  }
  out[threadIdx.x] = steps;
}

__global__ void signed_divmod(const int* a, const int* b, int* q, int* r) {
  int i = threadIdx.x;
  q[i] = a[i] / b[i];
  r[i] = a[i] % b[i];
}

__global__ void bits_and_votes(const unsigned* in, unsigned* out) {
  unsigned x = in[threadIdx.x];
  unsigned v = __popc(x) + __clz((int)x) + (__brev(x) >> 28);
  unsigned ballot = __ballot_sync(0xffffffffu, x & 1);
  int all = __all_sync(0xffffffffu, x != 0);
  atomicMax(&out[0], v);
  atomicMin(&out[1], v);
  out[2 + threadIdx.x] = ballot + all + min(x, 7u) + max((int)x, -3);
}
