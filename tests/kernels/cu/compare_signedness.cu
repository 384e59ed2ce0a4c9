// Signed vs unsigned comparisons of the same bits; negative values are huge when unsigned.
extern "C" __global__ void compare_signedness(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int x = a[i], y = b[i];
    unsigned ux = (unsigned)x, uy = (unsigned)y;
    out[i] = (x < y) | ((ux < uy) << 1) | ((x >= y) << 2) | ((ux >= uy) << 3) | ((x == y) << 4);
  }
}
