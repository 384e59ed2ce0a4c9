// abs, negation and bitwise not (inputs avoid abs(INT_MIN), which is undefined in C++).
extern "C" __global__ void abs_neg_not(const int* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = x[i];
    out[3 * i + 0] = abs(v);
    out[3 * i + 1] = (int)(0u - (unsigned)v);
    out[3 * i + 2] = ~v;
  }
}
