// Iterative Fibonacci in unsigned arithmetic (wraps for large n).
extern "C" __global__ void fibonacci(const int* nth, unsigned* fib, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned a = 0, b = 1;
    for (int k = 0; k < nth[i]; ++k) {
      unsigned t = a + b;
      a = b;
      b = t;
    }
    fib[i] = a;
  }
}
