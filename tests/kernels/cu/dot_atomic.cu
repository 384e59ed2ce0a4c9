// Dot product: a grid-stride partial sum per thread, combined with atomicAdd.
extern "C" __global__ void dot_atomic(const int* a, const int* b, int* result, int n) {
  int sum = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    sum += a[i] * b[i];
  }
  atomicAdd(result, sum);
}
