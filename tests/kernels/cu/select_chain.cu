// A chain of conditional selects: classify each value into one of five ranges.
extern "C" __global__ void select_chain(const int* x, int* cls, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = x[i];
    cls[i] = v < -100 ? 10 : v < 0 ? 20 : v == 0 ? 30 : v < 100 ? 40 : 50;
  }
}
