// Shift amounts of 32 and more, guarded the way portable CUDA code writes them
// (a bare x << 32 is undefined in C++).
extern "C" __global__ void shift_wide(const int* x, const unsigned* s, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned k = s[i];
    int v = x[i];
    out[3 * i + 0] = k < 32 ? (int)((unsigned)v << k) : 0;
    out[3 * i + 1] = k < 32 ? (int)((unsigned)v >> k) : 0;
    out[3 * i + 2] = k < 32 ? v >> k : (v < 0 ? -1 : 0);
  }
}
