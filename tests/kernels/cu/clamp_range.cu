// Clamp to [lo, hi] given as scalar parameters.
extern "C" __global__ void clamp_range(int* a, int lo, int hi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = min(max(a[i], lo), hi);
}
