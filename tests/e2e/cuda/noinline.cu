// A device function clang does not inline: PTX calls it with .param arguments; refused at the call.
__device__ __noinline__ int twice(int x) { return 2 * x; }
__global__ void k(int* a) {
  a[threadIdx.x] = twice(a[threadIdx.x]);
}
