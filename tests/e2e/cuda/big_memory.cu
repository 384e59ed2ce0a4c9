// More than 512 words of global memory (configs/simt_qwen2b_large.yaml holds 1,024): one
// thread block fills `a` with spread values, then every thread reverses, scales and offsets its
// grid-stride share of `a` into `out` and counts the values' low 4 bits in `hist` with atomics.
// With a = 500 words, out = 500 and hist = 16 the launch's arrays take 1,016 words.
extern "C" __global__ void spread(int* a, int* out, int* hist, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    a[i] = static_cast<int>((static_cast<unsigned>(i) * 2654435761u) >> (4 + 6 * (i & 3))) - 100;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int v = a[n - 1 - i];
    out[i] = static_cast<int>(static_cast<unsigned>(v) * 3u + static_cast<unsigned>(i));
    atomicAdd(&hist[v & 15], 1);
  }
}
