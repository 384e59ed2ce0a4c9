// c[i] = a[i] + b[i] with the usual bounds guard; threads past n must not write.
extern "C" __global__ void vec_add(const int* a, const int* b, int* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
