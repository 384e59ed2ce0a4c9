// Wrapping counters: atomicInc wraps to 0 past its limit, atomicDec wraps to its limit at 0.
extern "C" __global__ void atomic_inc_dec(unsigned* ctr, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicInc(&ctr[0], 5u);
    atomicDec(&ctr[1], 7u);
    atomicInc(&ctr[2], 0xffffffffu);
  }
}
