// Records every thread's coordinates; blocks of any size (odd sizes give partial warps).
extern "C" __global__ void block_ids(int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = blockIdx.x * 1000000 + threadIdx.x * 10000 + blockDim.x * 100 + gridDim.x;
}
