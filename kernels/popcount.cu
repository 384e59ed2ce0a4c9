// popcount(x) elementwise: out[i] = the number of 1 bits in x[i]'s 32-bit two's-complement word
// (popcount(-1) = 32). Any 1-D launch.
extern "C" __global__ void popcount(const int* x, int n, int* out) {
#pragma unroll 1
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) out[i] = __popc((unsigned)x[i]);
}
