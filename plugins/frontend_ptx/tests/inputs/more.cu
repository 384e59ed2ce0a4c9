// More integer kernels: shared-memory atomics, CAS loop, every atomic, shuffles with widths,
// 64-bit and sub-word arithmetic, a switch, nested loops with break/return, an inlined helper, 2-D indexing.
__global__ void shared_atomics(const int* in, int* out) {
  __shared__ int counts[4];
  __shared__ unsigned flags;
  if (threadIdx.x < 4) counts[threadIdx.x] = 0;
  if (threadIdx.x == 0) flags = 0;
  __syncthreads();
  int v = in[threadIdx.x];
  atomicAdd(&counts[v & 3], 1);
  atomicOr(&flags, 1u << (v & 31));
  atomicXor((int*)&flags, 0);
  __syncthreads();
  if (threadIdx.x < 4) out[threadIdx.x] = counts[threadIdx.x];
  if (threadIdx.x == 0) out[4] = flags;
}

__global__ void cas_max(int* p, int v) {
  int old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, v > assumed ? v : assumed);
  } while (assumed != old);
}

__global__ void misc_atomics(unsigned* p, int* q) {
  atomicInc(p, 10u);
  atomicDec(p + 1, 10u);
  atomicExch(q, 5);
  atomicSub(q + 1, 3);
  atomicAnd(q + 2, 6);
  atomicMin(q + 3, -1);
  atomicMax(q + 4, 7);
}

__global__ void shuffles(int* out) {
  int lane = threadIdx.x & 31;
  int a = __shfl_xor_sync(0xffffffffu, lane, 1, 8);
  int b = __shfl_sync(0xffffffffu, lane, 3, 16);
  int c = __shfl_up_sync(0xffffffffu, lane, 2, 4);
  int d = __any_sync(0xffffffffu, lane > 30);
  out[threadIdx.x] = a + b * 100 + c * 10000 + d;
}

__global__ void wide_math(const long long* a, long long* b, const signed char* c, short* d, unsigned n) {
  unsigned i = threadIdx.x;
  b[i] = a[i] * 3 + (a[i] >> 5) - (long long)c[i];
  d[i] = (short)(c[i] * 2) + (short)(i / n) + (short)(i % 7u);
}

__global__ void switchy(const int* in, int* out) {
  int x = in[threadIdx.x], r;
  switch (x & 7) {
    case 0: r = x * 3; break;
    case 1: r = x - 9; break;
    case 2: r = x << 2; break;
    case 5: r = x ^ 0x55; break;
    default: r = -x; break;
  }
  out[threadIdx.x] = r;
}

__global__ void nested(int* out, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      if ((i * j) % 5 == 3) break;
      s += i ^ j;
    }
    if (s > 1000) return;
  }
  out[threadIdx.x] = s;
}

__device__ int helper(int x) { return x * x + 1; }
__global__ void calls_helper(int* out) { out[threadIdx.x] = helper(threadIdx.x); }

__global__ void two_d(int* out, int w) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  out[y * w + x] = threadIdx.z + gridDim.y + blockDim.z;
}
