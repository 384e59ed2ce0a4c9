// A 64-bin histogram of 8-bit intensities (bin = value / 4), privatized per block: each block
// counts its grid-stride share into shared memory with shared atomics, then adds its non-zero bins
// to the global histogram with one global atomic per bin.
#define BINS 64

extern "C" __global__ void histogram64(const int* pixels, int n, int* hist) {
  __shared__ int local[BINS];
  for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[(pixels[i] & 0xff) >> 2], 1);
  __syncthreads();
  for (int b = threadIdx.x; b < BINS; b += blockDim.x)
    if (local[b] != 0) atomicAdd(&hist[b], local[b]);
}
