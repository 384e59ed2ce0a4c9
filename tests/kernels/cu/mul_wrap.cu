// Products that overflow 32 bits wrap (computed unsigned, so the C++ is well defined).
extern "C" __global__ void mul_wrap(const unsigned* a, const unsigned* b, unsigned* prod, unsigned* mad, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    prod[i] = a[i] * b[i];
    mad[i] = a[i] * b[i] + 0x9e3779b9u;
  }
}
