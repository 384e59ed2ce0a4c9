// Histogram of the low 3 bits with global atomicAdd and a grid-stride loop.
extern "C" __global__ void histogram(const int* data, int n, int* bins) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&bins[data[i] & 7], 1);
  }
}
