// Signed and unsigned atomicMin/atomicMax over all elements.
extern "C" __global__ void atomic_min_max(const int* x, int n, int* smin, int* smax, unsigned* umn, unsigned* umx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicMin(smin, x[i]);
    atomicMax(smax, x[i]);
    atomicMin(umn, (unsigned)x[i]);
    atomicMax(umx, (unsigned)x[i]);
  }
}
