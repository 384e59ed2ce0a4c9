// An if/else whose two sides add to shared and to global memory: clang merges the two atomics
// into one on a select of the addresses (tests/CMakeLists.txt, run_mixed_space_*).
extern "C" __global__ void split(const unsigned* in, unsigned* acc) {
  __shared__ unsigned s[1];
  if (threadIdx.x == 0) s[0] = 0;
  __syncthreads();
  const unsigned v = in[threadIdx.x];
  if (v & 1u)
    atomicAdd(&s[0], v);
  else
    atomicAdd(&acc[1], v);
  __syncthreads();
  if (threadIdx.x == 0) acc[0] = s[0];
}
