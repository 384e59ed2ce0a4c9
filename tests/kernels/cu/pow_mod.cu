// Modular exponentiation by squaring; m < 46341 keeps every product below 2^31.
extern "C" __global__ void pow_mod(const int* base, const int* expo, int m, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int b = base[i] % m, e = expo[i], r = 1 % m;
    while (e > 0) {
      if (e & 1) r = r * b % m;
      b = b * b % m;
      e >>= 1;
    }
    out[i] = r;
  }
}
