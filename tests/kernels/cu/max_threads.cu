// Every thread of a full launch counts itself, globally and per block.
extern "C" __global__ void max_threads(int* total, int* per_block, int* lane_sum) {
  atomicAdd(total, 1);
  atomicAdd(&per_block[blockIdx.x], 1);
  atomicAdd(&lane_sum[blockIdx.x], (int)(threadIdx.x & 3));
}
