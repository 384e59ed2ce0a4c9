// Unsigned division and remainder of values with the top bit set.
extern "C" __global__ void div_rem_unsigned(const unsigned* a, const unsigned* b, unsigned* q, unsigned* r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    q[i] = a[i] / b[i];
    r[i] = a[i] % b[i];
  }
}
