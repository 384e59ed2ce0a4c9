// Euclid's algorithm: a remainder inside a divergent loop.
extern "C" __global__ void gcd(const int* a, const int* b, int* g, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int x = abs(a[i]), y = abs(b[i]);
    while (y != 0) {
      int t = x % y;
      x = y;
      y = t;
    }
    g[i] = x;
  }
}
