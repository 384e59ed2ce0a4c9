// y = A x for a rows x cols row-major matrix, one thread per row.
extern "C" __global__ void matvec(const int* A, const int* x, int* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    int acc = 0;
    for (int c = 0; c < cols; ++c) acc += A[r * cols + c] * x[c];
    y[r] = acc;
  }
}
