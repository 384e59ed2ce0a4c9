// Integer SAXPY with the scalars first, as in the classic CUDA sample.
extern "C" __global__ void saxpy_int(int n, int a, const int* x, int* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
