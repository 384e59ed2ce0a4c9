// An atomic multiply built from an atomicCAS retry loop (order-independent result).
__device__ unsigned atomic_mul_u32(unsigned* addr, unsigned v) {
  unsigned old = *addr, assumed;
  do {
    assumed = old;
    old = atomicCAS(addr, assumed, assumed * v);
  } while (assumed != old);
  return old;
}

extern "C" __global__ void atomic_cas_mul(const unsigned* x, int n, unsigned* prod) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomic_mul_u32(&prod[i & 1], x[i]);
}
