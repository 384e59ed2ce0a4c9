// min/max in both signednesses.
extern "C" __global__ void min_max(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int x = a[i], y = b[i];
    out[4 * i + 0] = min(x, y);
    out[4 * i + 1] = max(x, y);
    out[4 * i + 2] = (int)umin((unsigned)x, (unsigned)y);
    out[4 * i + 3] = (int)umax((unsigned)x, (unsigned)y);
  }
}
