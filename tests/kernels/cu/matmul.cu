// C = A B for n x n matrices, one thread per output element.
extern "C" __global__ void matmul(const int* A, const int* B, int* C, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n * n) {
    int r = t / n, c = t % n;
    int acc = 0;
    for (int k = 0; k < n; ++k) acc += A[r * n + k] * B[k * n + c];
    C[t] = acc;
  }
}
