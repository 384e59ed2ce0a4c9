// maximum(x) and minimum(x) of x[0..n-1], n >= 1 (cannot overflow). Launch: 1 block of at most 8
// threads (the library uses 4); each thread scans a strided part, thread 0 combines the parts.
template <bool kMax>
__device__ inline int pick(int a, int b) {
  return kMax ? max(a, b) : min(a, b);
}

template <bool kMax>
__device__ inline void extremum(const int* x, int n, int* out, int* part) {
  int t = threadIdx.x;
  int m = x[0];  // n >= 1: a valid start for every thread
#pragma unroll 1
  for (int i = t; i < n; i += blockDim.x) m = pick<kMax>(m, x[i]);
  part[t] = m;
  __syncthreads();
  if (t == 0) {
#pragma unroll 1
    for (int k = 1; k < (int)blockDim.x; ++k) m = pick<kMax>(m, part[k]);
    out[0] = m;
  }
}

// part: blockDim.x words of __shared__ memory, declared in the kernel (one inside a device
// function becomes a .weak symbol the frontend does not read).
extern "C" __global__ void maximum(const int* x, int n, int* out) {
  __shared__ int part[8];
  extremum<true>(x, n, out, part);
}
extern "C" __global__ void minimum(const int* x, int n, int* out) {
  __shared__ int part[8];
  extremum<false>(x, n, out, part);
}
