// Transposes a 4x4 tile per block through shared memory.
extern "C" __global__ void smem_transpose(const int* in, int* out) {
  __shared__ int tile[4][4];
  int t = threadIdx.x;
  int r = t / 4, c = t % 4;
  int base = blockIdx.x * 16;
  tile[r][c] = in[base + t];
  __syncthreads();
  out[base + t] = tile[c][r];
}
