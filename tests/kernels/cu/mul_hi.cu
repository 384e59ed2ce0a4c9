// High halves of 32x32 products, signed and unsigned.
extern "C" __global__ void mul_hi(const int* a, const int* b, int* hi, unsigned* uhi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    hi[i] = __mulhi(a[i], b[i]);
    uhi[i] = __umulhi((unsigned)a[i], (unsigned)b[i]);
  }
}
