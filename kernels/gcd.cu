// gcd(a, b) elementwise: out[i] = the greatest common divisor of |a[i]| and |b[i]| (gcd(0, 0) = 0),
// by Euclid's algorithm on the magnitudes as unsigned words. *overflow (0 before the launch) is set
// to 1 when a result is 2^31 (only gcd(-2^31, 0) and gcd(-2^31, -2^31)). Any 1-D launch.
__device__ inline unsigned magnitude(int v) {
  return v < 0 ? 0u - (unsigned)v : (unsigned)v;
}

extern "C" __global__ void gcd(const int* a, const int* b, int n, int* out, int* overflow) {
  int ov = 0;
#pragma unroll 1
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    unsigned x = magnitude(a[i]), y = magnitude(b[i]);
#pragma unroll 1
    while (y != 0) {
      unsigned t = x % y;
      x = y;
      y = t;
    }
    ov |= (int)x < 0;
    out[i] = (int)x;
  }
  if (ov) atomicOr(overflow, 1);
}
