// sort(x): out = x in ascending order (stable rank sort: x[i] goes to the number of elements
// smaller than it, or equal and before it). Each element's rank is independent, so any 1-D launch
// works: a grid-stride loop over the elements.
extern "C" __global__ void sort(const int* x, int n, int* out) {
#pragma unroll 1
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int v = x[i], rank = 0;
#pragma unroll 1
    for (int j = 0; j < n; ++j) {
      int w = x[j];
      rank += (w < v) | ((w == v) & (j < i));
    }
    out[rank] = v;
  }
}
