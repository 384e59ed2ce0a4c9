// Uses the values atomicAdd returns: their sum is order-independent, and the thread that
// sees n - 1 is the last one ("last block done" pattern).
extern "C" __global__ void atomic_old_values(int n, int* counter, int* old_sum, int* last_seen) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int old = atomicAdd(counter, 1);
    atomicAdd(old_sum, old);
    if (old == n - 1) *last_seen = 1;
  }
}
