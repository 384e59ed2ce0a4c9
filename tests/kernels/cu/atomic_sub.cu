// atomicSub from a budget, per bucket.
extern "C" __global__ void atomic_sub(const int* cost, int n, int* budget) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicSub(&budget[i & 1], cost[i]);
}
