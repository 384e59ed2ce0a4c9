// Three arrays: c[i] = a[i] * b[i] + c[i] (multiply-add in place).
extern "C" __global__ void mad3(const int* a, const int* b, int* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * b[i] + c[i];
}
