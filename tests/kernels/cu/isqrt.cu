// Integer square root by bisection (a loop with a data-dependent branch inside).
extern "C" __global__ void isqrt(const int* x, int* root, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned v = (unsigned)x[i];
    unsigned lo = 0, hi = 65536;
    while (hi - lo > 1) {
      unsigned mid = (lo + hi) / 2;
      if (mid * mid <= v)
        lo = mid;
      else
        hi = mid;
    }
    root[i] = (int)lo;
  }
}
