// Two entry points in one file: the launch picks one with --kernel.
extern "C" __global__ void square_all(int* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * a[i];
}

extern "C" __global__ void negate_all(int* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = -a[i];
}
