// Divergent if/else inside a warp, with stores on both sides (not a simple select).
extern "C" __global__ void divergent_if(int* a, int* odd_count, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = a[i];
  if (v & 1) {
    a[i] = 3 * v + 1;
    atomicAdd(odd_count, 1);
  } else {
    a[i] = v / 2;
  }
}
