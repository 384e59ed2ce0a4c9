// Signed division and remainder truncate toward zero; the remainder takes the dividend's sign.
extern "C" __global__ void div_rem_signed(const int* a, const int* b, int* q, int* r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    q[i] = a[i] / b[i];
    r[i] = a[i] % b[i];
  }
}
