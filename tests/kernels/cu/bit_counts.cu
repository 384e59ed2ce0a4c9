// Population count, leading zeros, bit reverse and find-first-set.
extern "C" __global__ void bit_counts(const int* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = x[i];
    out[4 * i + 0] = __popc((unsigned)v);
    out[4 * i + 1] = __clz(v);
    out[4 * i + 2] = (int)__brev((unsigned)v);
    out[4 * i + 3] = __ffs(v);
  }
}
