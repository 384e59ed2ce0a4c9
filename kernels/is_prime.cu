// is_prime(x) elementwise: out[i] = 1 when x[i] is prime, else 0 (negative numbers, 0 and 1 are not).
// Trial division by 2 and the odd numbers d with d * d <= x; d stays <= 46339 so d * d never
// overflows (46341^2 > 2^31 - 1). Any 1-D launch.
extern "C" __global__ void is_prime(const int* x, int n, int* out) {
#pragma unroll 1
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int v = x[i];
    int prime = v == 2 || (v > 2 && (v & 1));
#pragma unroll 1
    for (int d = 3; prime && d <= 46339 && d * d <= v; d += 2) prime = v % d != 0;
    out[i] = prime;
  }
}
