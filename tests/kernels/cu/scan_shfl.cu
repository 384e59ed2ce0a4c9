// Inclusive prefix sum, in place, of 128-element tiles, one tile per block of 32 threads (one CUDA
// warp), as block scans are written: the tile is staged in shared memory with coalesced loads,
// each thread scans its 4 consecutive elements, a warp scan of the threads' totals with
// __shfl_up_sync (width 32) gives each thread its offset, and the results go back through shared
// memory. block_sums[b] = the tile's total (what a second pass would scan to join the tiles).
#define THREADS 32
#define ITEMS 4
#define FULL_MASK 0xffffffffu

extern "C" __global__ void scan_shfl(int* x, int* block_sums) {
  __shared__ int tile[THREADS * ITEMS];
  const int t = threadIdx.x;
  const int base = blockIdx.x * THREADS * ITEMS;
  for (int k = 0; k < ITEMS; ++k) tile[k * THREADS + t] = x[base + k * THREADS + t];  // coalesced
  __syncthreads();
  int v[ITEMS];
  int sum = 0;
  for (int k = 0; k < ITEMS; ++k) v[k] = sum += tile[t * ITEMS + k];
  int incl = sum;
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(FULL_MASK, incl, d);
    if (t >= d) incl += y;
  }
  const int offset = incl - sum;
  for (int k = 0; k < ITEMS; ++k) tile[t * ITEMS + k] = v[k] + offset;
  __syncthreads();
  for (int k = 0; k < ITEMS; ++k) x[base + k * THREADS + t] = tile[k * THREADS + t];
  if (t == THREADS - 1) block_sums[blockIdx.x] = incl;
}
