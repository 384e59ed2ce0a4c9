// atomicAnd/Or/Xor fold all elements into three words.
extern "C" __global__ void atomic_bitwise(const int* x, int n, int* acc) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAnd(&acc[0], x[i]);
    atomicOr(&acc[1], x[i]);
    atomicXor(&acc[2], x[i]);
  }
}
