// Polynomial evaluation (Horner) with a coefficient array and a scalar degree.
extern "C" __global__ void horner(const int* coef, int degree, const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = x[i], acc = 0;
    for (int k = degree; k >= 0; --k) acc = acc * v + coef[k];
    y[i] = acc;
  }
}
