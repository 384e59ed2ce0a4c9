// C = A * B (M x K times K x N, row-major) through 4 x 4 tiles in shared memory: each 4 x 4 block
// of threads computes one tile of C, walking K one pair of tiles at a time; the tiles are padded
// with zeros past the matrices' edges, so any M, K and N work. The walk along K stays a loop:
// nvcc -O3 unrolls it 4 times (plus a remainder loop), 130 ROM blocks, more than the machine's 128.
#define TILE 4

extern "C" __global__ void tiled_matmul(const int* A, const int* B, int* C, int M, int K, int N) {
  __shared__ int As[TILE][TILE];
  __shared__ int Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  int acc = 0;
#pragma unroll 1
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = row < M && k0 + tx < K ? A[row * K + k0 + tx] : 0;
    Bs[ty][tx] = k0 + ty < K && col < N ? B[(k0 + ty) * N + col] : 0;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
