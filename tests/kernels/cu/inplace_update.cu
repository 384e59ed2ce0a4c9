// One array updated in place; k is a scalar.
extern "C" __global__ void inplace_update(int* a, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = a[i];
    a[i] = v * k + (v >> 1);
  }
}
