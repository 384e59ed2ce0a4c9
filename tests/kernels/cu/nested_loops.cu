// Nested loops whose bounds depend on the thread (xor keeps the compiler from a closed form).
extern "C" __global__ void nested_loops(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int acc = 0;
    for (int j = 0; j <= i; ++j) {
      for (int k = j; k < i + 2; ++k) acc += (j ^ k) - 1;
    }
    out[i] = acc;
  }
}
