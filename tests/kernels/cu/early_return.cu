// Several early returns; some lanes exit while others keep going.
extern "C" __global__ void early_return(const int* a, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = a[i];
  if (v < 0) {
    out[i] = -1;
    return;
  }
  if (v == 0) return;
  int r = v;
  if (v > 100) {
    out[i] = 100;
    return;
  }
  r = r * 2 + 1;
  out[i] = r;
}
