// Division by 10 signed and unsigned, and an unsigned remainder by 3 (mul.hi sequences).
extern "C" __global__ void div_by_const_unsigned(const int* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = x[i];
    unsigned u = (unsigned)v;
    out[3 * i + 0] = v / 10;
    out[3 * i + 1] = (int)(u / 10u);
    out[3 * i + 2] = (int)(u % 3u);
  }
}
