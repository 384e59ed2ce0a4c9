// First-to-claim with atomicExch: exactly one thread per bucket sees 0, whatever the order.
extern "C" __global__ void atomic_exch_claim(const int* key, int n, int* flag, int* winners, int* members) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int k = key[i] & 3;
    if (atomicExch(&flag[k], 1) == 0) atomicAdd(&winners[k], 1);
    atomicAdd(&members[k], 1);
  }
}
