// Grid-stride loop: fewer threads than elements, each thread handles several.
extern "C" __global__ void grid_stride(const int* in, int* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = in[i] * 3 - 1;
  }
}
