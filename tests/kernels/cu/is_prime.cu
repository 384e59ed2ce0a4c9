// Trial division with an early exit; lanes run very different trip counts.
extern "C" __global__ void is_prime(const int* x, int* prime, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i];
  int p = v >= 2;
  for (int d = 2; d * d <= v; ++d) {
    if (v % d == 0) {
      p = 0;
      break;
    }
  }
  prime[i] = p;
}
